import { randomInt } from 'node:crypto';
import { hashSecret, secretMatches } from './secret-token-fns.js';

/** Digits of an e-mailed confirmation code (SPEC.md §8). */
export const EMAIL_CODE_DIGITS = 6;
/** Seconds an e-mailed code stays valid (DECISIONS.md: the e-mail-change code expires after 10 minutes). */
export const EMAIL_CODE_TTL_SECONDS = 600;
/**
 * Wrong guesses after which a pending code is void. With 10^6 codes this keeps the chance of
 * guessing one at 5 in a million per code sent; the expiry alone would not.
 */
export const EMAIL_CODE_MAX_ATTEMPTS = 5;

const CODE = /^[0-9]{6}$/;

/** A uniformly random 6-digit code, leading zeros kept (`000042` is a code). */
export function generateEmailCode(): string {
  return String(randomInt(10 ** EMAIL_CODE_DIGITS)).padStart(EMAIL_CODE_DIGITS, '0');
}

/**
 * The form a code is stored in (SHA-256 hex). Only a million codes exist, so this hash does not
 * resist a search: it keeps the live code out of database dumps and query logs at a glance. What
 * protects a code is its short life and the attempt limit (EMAIL_CODE_MAX_ATTEMPTS).
 */
export function hashEmailCode(code: string): string {
  if (!CODE.test(code)) throw new Error('not a 6-digit code');
  return hashSecret(code);
}

/**
 * Whether a typed code matches the stored hash, in constant time. Spaces around and inside the
 * code (as in `123 456`) are ignored; anything else but six digits matches nothing.
 */
export function emailCodeMatches(code: string, storedHash: string): boolean {
  if (typeof code !== 'string') return false;
  const typed = code.replace(/\s/g, '');
  return CODE.test(typed) && secretMatches(typed, storedHash);
}
