import { randomInt } from 'node:crypto';
import { HOTP, Secret, TOTP } from 'otpauth';
import { hashSecret, secretMatches } from './secret-token-fns.js';

// DECISIONS.md: RFC 6238 with SHA-1, 6 digits, 30-second steps, one step of drift either way.
// These are the parameters every authenticator app assumes when the URI leaves them out. HOTP,
// TOTP, base32 and the otpauth URI come from the `otpauth` library; only the step bookkeeping
// (which step matched, replays) and the recovery codes are identity's own.
/** Digits of a TOTP code. */
export const TOTP_DIGITS = 6;
/** Seconds per TOTP time step. */
export const TOTP_PERIOD_SECONDS = 30;
/** Steps of clock drift accepted on either side of the current one. */
export const TOTP_WINDOW = 1;
/** Bytes of a TOTP secret: 160 bits, the HMAC-SHA-1 block-size recommendation of RFC 4226 §4. */
export const TOTP_SECRET_BYTES = 20;

const ALGORITHM = 'SHA1';

/** RFC 4648 base32 without padding, the form authenticator apps read. */
export function base32Encode(bytes: Uint8Array): string {
  return new Secret({ buffer: Uint8Array.from(bytes).buffer }).base32;
}

/** Decodes RFC 4648 base32 (case-insensitive, padding optional); throws on any other character. */
export function base32Decode(text: string): Buffer {
  return Buffer.from(Secret.fromBase32(text).bytes);
}

/** A new TOTP secret: 20 random bytes as unpadded base32 (32 characters). */
export function generateTotpSecret(): string {
  return new Secret({ size: TOTP_SECRET_BYTES }).base32;
}

/** The time step (RFC 6238 `T`) that contains `nowMs`. */
export function totpStep(nowMs: number): number {
  return TOTP.counter({ period: TOTP_PERIOD_SECONDS, timestamp: nowMs });
}

/** The code of a base32 secret at a time step (6 digits unless told). */
export function totpCode(secretBase32: string, timeStep: number, digits = TOTP_DIGITS): string {
  return HOTP.generate({
    secret: Secret.fromBase32(secretBase32),
    algorithm: ALGORITHM,
    digits,
    counter: timeStep,
  });
}

const SIX_DIGITS = /^[0-9]{6}$/;

/**
 * Checks a code against the steps around `nowMs` and returns the step it matched, or undefined.
 * A step at or before `lastUsedStep` is refused, so an accepted code cannot be used again (store
 * the returned step as the new `lastUsedStep`). Anything but exactly six ASCII digits is refused.
 */
export function verifyTotp(
  secretBase32: string,
  code: string,
  nowMs: number,
  lastUsedStep?: number,
): number | undefined {
  if (typeof code !== 'string' || !SIX_DIGITS.test(code)) return undefined;
  let secret: Secret;
  try {
    secret = Secret.fromBase32(secretBase32);
  } catch {
    return undefined;
  }
  if (secret.bytes.length === 0) return undefined;
  const delta = TOTP.validate({
    token: code,
    secret,
    algorithm: ALGORITHM,
    digits: TOTP_DIGITS,
    period: TOTP_PERIOD_SECONDS,
    timestamp: nowMs,
    window: TOTP_WINDOW,
  });
  if (delta === null) return undefined;
  const step = totpStep(nowMs) + delta;
  return lastUsedStep === undefined || step > lastUsedStep ? step : undefined;
}

/**
 * The `otpauth://` URI an authenticator app reads from a QR code (Google's Key URI Format), with
 * the issuer both in the label and as a parameter, and the algorithm, digits and period spelt out.
 * Built here rather than by otpauth's `TOTP.toString()`, which orders the parameters differently:
 * the API has always answered `secret` first, and clients compare the string.
 */
export function otpauthUri(input: { issuer: string; account: string; secretBase32: string }): string {
  const label = `${encodeURIComponent(input.issuer)}:${encodeURIComponent(input.account)}`;
  const params = new URLSearchParams({
    secret: input.secretBase32,
    issuer: input.issuer,
    algorithm: ALGORITHM,
    digits: String(TOTP_DIGITS),
    period: String(TOTP_PERIOD_SECONDS),
  });
  // URLSearchParams writes spaces as `+`, which some authenticator apps show literally.
  return `otpauth://totp/${label}?${params.toString().replace(/\+/g, '%20')}`;
}

// No 0/o, 1/i/l: a code read off paper is typed back right. 31 symbols, 12 per code: ~59 bits.
const RECOVERY_ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';
const RECOVERY_GROUPS = 3;
const RECOVERY_GROUP_LENGTH = 4;
const RECOVERY_NORMALIZED = new RegExp(
  `^[${RECOVERY_ALPHABET}]{${RECOVERY_GROUPS * RECOVERY_GROUP_LENGTH}}$`,
);

/** A code as typed (any case, with or without hyphens or spaces) in the form that is hashed, or undefined. */
function normalizeRecoveryCode(code: string): string | undefined {
  if (typeof code !== 'string') return undefined;
  const normalized = code.toLowerCase().replace(/[\s-]/g, '');
  return RECOVERY_NORMALIZED.test(normalized) ? normalized : undefined;
}

/** SHA-256 (hex) of a recovery code in its normalised form; ~59 random bits and single use. */
export function hashRecoveryCode(code: string): string {
  const normalized = normalizeRecoveryCode(code);
  if (!normalized) throw new Error('not a recovery code');
  return hashSecret(normalized);
}

/**
 * New single-use recovery codes like `abcd-efgh-jkmn`: `codes` are shown to the user once,
 * `hashes` (same order) are stored.
 */
export function generateRecoveryCodes(n = 10): { codes: string[]; hashes: string[] } {
  const codes: string[] = [];
  for (let i = 0; i < n; i++) {
    const groups: string[] = [];
    for (let g = 0; g < RECOVERY_GROUPS; g++) {
      let group = '';
      for (let c = 0; c < RECOVERY_GROUP_LENGTH; c++)
        group += RECOVERY_ALPHABET[randomInt(RECOVERY_ALPHABET.length)];
      groups.push(group);
    }
    codes.push(groups.join('-'));
  }
  return { codes, hashes: codes.map(hashRecoveryCode) };
}

/** Whether a typed recovery code (case and hyphens ignored) matches a stored hash, in constant time. */
export function recoveryCodeMatches(code: string, storedHash: string): boolean {
  const normalized = normalizeRecoveryCode(code);
  return normalized !== undefined && secretMatches(normalized, storedHash);
}

/**
 * The index of the stored hash a typed recovery code matches, or -1. Every hash is compared, so
 * the time taken does not say which code was used.
 */
export function findRecoveryCode(code: string, storedHashes: readonly string[]): number {
  const normalized = normalizeRecoveryCode(code);
  let found = -1;
  for (let i = 0; i < storedHashes.length; i++) {
    const match = normalized !== undefined && secretMatches(normalized, storedHashes[i]!);
    if (match && found < 0) found = i;
  }
  return found;
}
