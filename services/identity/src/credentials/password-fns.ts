import { randomBytes } from 'node:crypto';
import { type Algorithm, hash, parseOptions, verify } from '@node-rs/argon2';

/** Fewest characters a password may have (DECISIONS.md: 12, for signup, change and set). */
export const PASSWORD_MIN_LENGTH = 12;
/** Most characters a password may have: argon2 cost grows with input, so an attacker cannot make us hash megabytes. */
export const PASSWORD_MAX_LENGTH = 256;

// `Algorithm` is an ambient const enum, which isolatedModules cannot read; 2 is Argon2id.
const ARGON2ID = 2 as Algorithm;

/** The argon2id cost settings an install may choose (ARGON2_MEMORY_KIB, ARGON2_TIME_COST, ARGON2_PARALLELISM). */
export interface Argon2Cost {
  memoryCost: number;
  timeCost: number;
  parallelism: number;
}

/** The least memory a new hash may use, in KiB (64 MiB; issue 16). Config refuses less. */
export const ARGON2_MIN_MEMORY_KIB = 65536;

/** The default argon2id parameters of new hashes: 64 MiB, 3 passes, 1 lane (RFC 9106's second recommendation, one lane). */
export const ARGON2_PARAMS = {
  algorithm: ARGON2ID,
  memoryCost: 65536,
  timeCost: 3,
  parallelism: 1,
  outputLen: 32,
} as const;

/**
 * A hash, with the default parameters, of 32 random bytes that were thrown away: no password
 * matches it. Verifying against it costs what verifying a real hash costs. `needsRehash` of it must
 * stay false (a unit test checks), so regenerate it when ARGON2_PARAMS change.
 */
export const DUMMY_PASSWORD_HASH =
  '$argon2id$v=19$m=65536,t=3,p=1$XCQBrt/ERFeoGrjW6wBh3Q$4URqGihsVoIgiI8WFqZqpHNaozvCvArKwGz4pN6m9cc';

// The parameters of this process: ARGON2_PARAMS unless configurePasswordHashing chose others at
// start-up. Module state because every service that hashes a password shares the one setting.
let current: Argon2Cost & { algorithm: Algorithm; outputLen: number } = { ...ARGON2_PARAMS };
let dummyHash: string = DUMMY_PASSWORD_HASH;

/**
 * Sets the parameters of new hashes for this process (call once at start-up, from config) and
 * makes a dummy hash with them, so that a refused sign-in of an unknown address still costs what
 * a real check costs. Throws on memory below ARGON2_MIN_MEMORY_KIB.
 */
export async function configurePasswordHashing(cost: Argon2Cost): Promise<void> {
  if (cost.memoryCost < ARGON2_MIN_MEMORY_KIB) {
    throw new RangeError(`argon2 memory must be at least ${ARGON2_MIN_MEMORY_KIB} KiB`);
  }
  const next = { ...ARGON2_PARAMS, ...cost };
  dummyHash =
    next.memoryCost === ARGON2_PARAMS.memoryCost &&
    next.timeCost === ARGON2_PARAMS.timeCost &&
    next.parallelism === ARGON2_PARAMS.parallelism
      ? DUMMY_PASSWORD_HASH
      : await hash(randomBytes(32), next);
  current = next;
}

/** The parameters new hashes are made with in this process. */
export function passwordHashParams(): Argon2Cost {
  return { memoryCost: current.memoryCost, timeCost: current.timeCost, parallelism: current.parallelism };
}

/**
 * Checks a new password against the policy; returns why it is refused, or undefined when it is
 * accepted. The reason never repeats the password.
 */
export function checkPasswordPolicy(password: string): string | undefined {
  if (typeof password !== 'string' || password === '') return 'password is required';
  // Count code points, not UTF-16 units, so an emoji is one character as the user sees it.
  const length = [...password].length;
  if (length < PASSWORD_MIN_LENGTH) return `password must be at least ${PASSWORD_MIN_LENGTH} characters long`;
  if (length > PASSWORD_MAX_LENGTH) return `password must be at most ${PASSWORD_MAX_LENGTH} characters long`;
  if (/\p{Cc}/u.test(password)) return 'password must not contain control characters';
  const missing: string[] = [];
  if (!/\p{Lu}/u.test(password)) missing.push('an upper-case letter');
  if (!/\p{Ll}/u.test(password)) missing.push('a lower-case letter');
  if (!/\p{Nd}/u.test(password)) missing.push('a digit');
  // Anything that is neither a letter nor a number counts as special, the space included.
  if (!/[^\p{L}\p{N}]/u.test(password)) missing.push('a special character');
  if (missing.length === 0) return undefined;
  const list = missing.length === 1 ? missing[0] : `${missing.slice(0, -1).join(', ')} and ${missing.at(-1)}`;
  return `password must include ${list}`;
}

// NIST SP 800-63B §5.1.1.2: normalise Unicode before hashing, so that the same password typed on
// another keyboard (composed vs decomposed accents, full-width digits) still matches.
const normalize = (password: string) => password.normalize('NFKC');

/** Hashes a password with argon2id; the result is a self-describing PHC string. */
export async function hashPassword(password: string): Promise<string> {
  return hash(normalize(password), current);
}

/**
 * Whether `password` matches a stored PHC hash. A malformed or non-argon2 stored hash matches
 * nothing (false) rather than throwing, so that a damaged row cannot turn a login into a 500.
 * Every refusal spends the time of a real verification, so its timing reveals nothing.
 */
export async function verifyPassword(storedHash: string, password: string): Promise<boolean> {
  if (typeof storedHash !== 'string' || typeof password !== 'string') {
    await burnPasswordCheck();
    return false;
  }
  // An over-long input cannot be a password we accepted; it is not hashed at full length.
  if ([...password].length > PASSWORD_MAX_LENGTH) {
    await burnPasswordCheck(password);
    return false;
  }
  try {
    return await verify(storedHash, normalize(password));
  } catch {
    await burnPasswordCheck(password);
    return false;
  }
}

/**
 * Whether a stored hash is weaker than today's parameters (rehash it after a successful sign-in):
 * another algorithm, version or output length, or less memory or fewer passes than configured. A
 * hash made with more (before an operator lowered the setting) is kept: rehashing would weaken it.
 */
export function needsRehash(storedHash: string): boolean {
  try {
    const o = parseOptions(storedHash);
    return (
      o.algorithm !== current.algorithm ||
      o.memoryCost < current.memoryCost ||
      o.timeCost < current.timeCost ||
      o.outputLen !== current.outputLen ||
      o.version !== 1 // Version.V0x13, argon2 1.3
    );
  } catch {
    return true;
  }
}

/**
 * Spends the time of one password verification and discards the result. Call it when a login
 * names an unknown e-mail (or an account without a password), so that the answer takes as long as
 * for a wrong password and does not reveal which addresses have accounts.
 */
export async function burnPasswordCheck(password = ''): Promise<void> {
  try {
    await verify(dummyHash, normalize(String(password).slice(0, PASSWORD_MAX_LENGTH)));
  } catch {
    // Nothing to report: the result is discarded either way.
  }
}
