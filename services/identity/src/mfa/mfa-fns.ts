import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { base32Encode, verifyTotp } from '../credentials/totp-fns.js';

/** Lifetime of the challenge a password sign-in answers with (DECISIONS.md: 300 s). */
export const MFA_CHALLENGE_TTL_SECONDS = 300;
/** Codes one challenge accepts before it is dead and the user signs in again. */
export const MFA_MAX_ATTEMPTS = 5;
/**
 * Failed codes one user may send, over all challenges, within MFA_FAILURE_WINDOW_SECONDS. Five per
 * challenge alone would let someone who has the password guess on through fresh sign-ins.
 */
export const MFA_FAILURE_LIMIT = 20;
/** The window of MFA_FAILURE_LIMIT, in seconds. */
export const MFA_FAILURE_WINDOW_SECONDS = 900;
/** Recovery codes handed out when TOTP is enabled. */
export const RECOVERY_CODE_COUNT = 10;
/** Issuer an authenticator app shows beside the account. */
export const TOTP_ISSUER = 'Custos';

// Format byte first, so a later change of cipher or key can be told apart from this one. Format 1
// was sealed under TOKEN_SIGNING_KEK (before MFA_SECRET_KEY existed); 2 is sealed under MFA_SECRET_KEY.
const LEGACY_FORMAT = 1;
const SEALED_FORMAT = 2;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = 1 + IV_BYTES + TAG_BYTES;

// Binding the user id means a sealed secret copied onto another user's row does not open.
function aad(userId: string): Buffer {
  return Buffer.from(`custos-totp-secret:${userId}`, 'utf8');
}

/**
 * Encrypts a TOTP secret with AES-256-GCM under the key-encryption key, bound to the user:
 * `format(1) | iv(12) | tag(16) | ciphertext`.
 */
export function sealTotpSecret(secret: Buffer, kek: Buffer, userId: string): Buffer {
  return seal(secret, kek, userId, SEALED_FORMAT);
}

function seal(secret: Buffer, kek: Buffer, userId: string, format: number): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', kek, iv);
  cipher.setAAD(aad(userId));
  const ct = Buffer.concat([cipher.update(secret), cipher.final()]);
  return Buffer.concat([Buffer.from([format]), iv, cipher.getAuthTag(), ct]);
}

/** Decrypts a sealed TOTP secret; throws when the key or user is wrong or the bytes were altered. */
export function openTotpSecret(sealed: Buffer, kek: Buffer, userId: string): Buffer {
  return open(sealed, kek, userId, SEALED_FORMAT);
}

/**
 * The time step a typed code matches under a sealed TOTP secret, never one at or before `lastStep`
 * (undefined for a code that is not a 6-digit OTP or does not match); the opened secret is zeroed.
 */
export function matchSealedTotp(
  sealed: Buffer,
  kek: Buffer,
  userId: string,
  code: string,
  lastStep: number | undefined,
  nowMs = Date.now(),
): number | undefined {
  const c = classifyCode(code);
  if (c.kind !== 'otp') return undefined;
  const secret = openTotpSecret(sealed, kek, userId);
  try {
    return verifyTotp(base32Encode(secret), c.code, nowMs, lastStep);
  } finally {
    secret.fill(0);
  }
}

/** True for a secret still sealed in format 1, under the token-signing KEK. */
export function isLegacySealed(sealed: Buffer): boolean {
  return sealed[0] === LEGACY_FORMAT;
}

/** Moves a format-1 secret (under the token-signing KEK) to format 2 under the MFA key. */
export function resealLegacyTotpSecret(
  sealed: Buffer,
  legacyKek: Buffer,
  kek: Buffer,
  userId: string,
): Buffer {
  const secret = open(sealed, legacyKek, userId, LEGACY_FORMAT);
  try {
    return seal(secret, kek, userId, SEALED_FORMAT);
  } finally {
    secret.fill(0);
  }
}

function open(sealed: Buffer, kek: Buffer, userId: string, format: number): Buffer {
  if (sealed.length <= HEADER_BYTES || sealed[0] !== format) throw new Error('unknown sealed format');
  const decipher = createDecipheriv('aes-256-gcm', kek, sealed.subarray(1, 1 + IV_BYTES));
  decipher.setAAD(aad(userId));
  decipher.setAuthTag(sealed.subarray(1 + IV_BYTES, HEADER_BYTES));
  return Buffer.concat([decipher.update(sealed.subarray(HEADER_BYTES)), decipher.final()]);
}

/** What a typed second-factor code looks like: a TOTP code (6 digits, spaces ignored) or anything else. */
export function classifyCode(
  code: string,
): { kind: 'otp'; code: string } | { kind: 'recovery'; code: string } {
  const compact = code.replace(/\s/g, '');
  return /^[0-9]{6}$/.test(compact) ? { kind: 'otp', code: compact } : { kind: 'recovery', code };
}
