import { createHash, randomInt, timingSafeEqual } from 'node:crypto';

/**
 * The prefix of every kind of high-entropy credential this service hands out (SPEC.md §2.6,
 * DECISIONS.md "Identity and tokens"). The prefix tells a reader, and a secret scanner, what leaked.
 */
export const SECRET_TOKEN_PREFIXES = {
  /** Personal (human) API key. */
  personalApiKey: 'csk_',
  /** Agent API key. */
  agentApiKey: 'ocv_',
  /** Platform application key. */
  platformKey: 'plt_',
  /** Router key of a proxy-enabled agent. */
  routerKey: 'sk-proxy-v1-',
  /** Re-auth (step-up) token. */
  reauth: 'rat_',
  /** Refresh token of a user session. */
  refresh: 'csr_',
  /** Single-use e-mailed token (verification, password reset, invitation, e-mail change undo). */
  email: 'cse_',
} as const;

/** One of the prefixes of SECRET_TOKEN_PREFIXES. */
export type SecretTokenPrefix = (typeof SECRET_TOKEN_PREFIXES)[keyof typeof SECRET_TOKEN_PREFIXES];

/** Characters of the lookup id (not secret: it is the primary key of the stored hash). */
export const TOKEN_ID_LENGTH = 16;
/** Characters of the secret: 43 × log2(62) ≈ 256.03 bits of entropy. */
export const TOKEN_SECRET_LENGTH = 43;

// Base62: no `_` or `-` inside id or secret, so the token splits unambiguously and survives a
// double-click select, URLs and shell quoting.
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KNOWN_PREFIXES = new Set<string>(Object.values(SECRET_TOKEN_PREFIXES));

/** A freshly generated credential: `token` is shown to its owner once, `id` and `secretHash` are stored. */
export interface GeneratedSecretToken {
  token: string;
  id: string;
  secretHash: string;
}

/** Random base62 text; crypto.randomInt draws without modulo bias. */
function randomBase62(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += BASE62[randomInt(BASE62.length)];
  return out;
}

/** Generates `<prefix><id>_<secret>`; only the SHA-256 of the secret is meant to be stored. */
export function generateSecretToken(prefix: SecretTokenPrefix): GeneratedSecretToken {
  if (!KNOWN_PREFIXES.has(prefix)) throw new Error(`unknown secret token prefix: ${String(prefix)}`);
  const id = randomBase62(TOKEN_ID_LENGTH);
  const secret = randomBase62(TOKEN_SECRET_LENGTH);
  return { token: `${prefix}${id}_${secret}`, id, secretHash: hashSecret(secret) };
}

const SHAPE = new RegExp(`^([0-9A-Za-z]{${TOKEN_ID_LENGTH}})_([0-9A-Za-z]{${TOKEN_SECRET_LENGTH}})$`);

/**
 * Splits a presented token into its lookup id and secret, or undefined when it is not exactly a
 * token of the expected kind (other prefix, other characters, other lengths, surrounding spaces).
 */
export function parseSecretToken(
  token: string,
  expectedPrefix: SecretTokenPrefix,
): { id: string; secret: string } | undefined {
  if (typeof token !== 'string' || !token.startsWith(expectedPrefix)) return undefined;
  const m = SHAPE.exec(token.slice(expectedPrefix.length));
  if (!m) return undefined;
  return { id: m[1]!, secret: m[2]! };
}

/** The prefix a token starts with, if it is one of ours (to pick the exchange path for a bare key). */
export function secretTokenPrefixOf(token: string): SecretTokenPrefix | undefined {
  if (typeof token !== 'string') return undefined;
  return Object.values(SECRET_TOKEN_PREFIXES).find((p) => token.startsWith(p));
}

/**
 * SHA-256 (hex) of a token secret, the form it is stored in. A slow hash (argon2) exists to make
 * guessing low-entropy passwords expensive; these secrets carry 256 random bits, so even a stolen
 * table of fast hashes cannot be reversed, and a fast hash keeps every API call cheap.
 */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

/** Whether `secret` hashes to `storedHash`, compared in constant time. */
export function secretMatches(secret: string, storedHash: string): boolean {
  if (typeof secret !== 'string' || typeof storedHash !== 'string' || !SHA256_HEX.test(storedHash))
    return false;
  const presented = createHash('sha256').update(secret, 'utf8').digest();
  return timingSafeEqual(presented, Buffer.from(storedHash, 'hex'));
}
