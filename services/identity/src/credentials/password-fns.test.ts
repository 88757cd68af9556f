import { type Algorithm, hash } from '@node-rs/argon2';
import {
  ARGON2_MIN_MEMORY_KIB,
  ARGON2_PARAMS,
  DUMMY_PASSWORD_HASH,
  PASSWORD_MAX_LENGTH,
  burnPasswordCheck,
  checkPasswordPolicy,
  hashPassword,
  configurePasswordHashing,
  needsRehash,
  passwordHashParams,
  verifyPassword,
} from './password-fns';

const GOOD = 'Correct-horse-9battery';

describe('checkPasswordPolicy', () => {
  it('accepts 12+ characters with upper, lower, digit and special', () => {
    expect(checkPasswordPolicy(GOOD)).toBeUndefined();
    expect(checkPasswordPolicy('Aa1!aaaaaaaa')).toBeUndefined();
    // A space is a special character; non-Latin letters count as letters.
    expect(checkPasswordPolicy('Ünïcödé pass 1')).toBeUndefined();
  });

  it('refuses short, long and empty passwords', () => {
    expect(checkPasswordPolicy('Aa1!aaaaaaa')).toBe('password must be at least 12 characters long');
    expect(checkPasswordPolicy('')).toBe('password is required');
    expect(checkPasswordPolicy(`Aa1!${'a'.repeat(PASSWORD_MAX_LENGTH - 4)}`)).toBeUndefined();
    expect(checkPasswordPolicy(`Aa1!${'a'.repeat(PASSWORD_MAX_LENGTH - 3)}`)).toBe(
      'password must be at most 256 characters long',
    );
  });

  it('counts characters as the user sees them, not UTF-16 units', () => {
    // 11 code points, 14 UTF-16 units.
    expect(checkPasswordPolicy('Aa1!😀😀😀aaaa')).toBe('password must be at least 12 characters long');
  });

  it('names each missing character class', () => {
    expect(checkPasswordPolicy('Correct-horse-battery')).toBe('password must include a digit');
    expect(checkPasswordPolicy('correct-horse-9battery')).toBe('password must include an upper-case letter');
    expect(checkPasswordPolicy('CORRECT-HORSE-9BATTERY')).toBe('password must include a lower-case letter');
    expect(checkPasswordPolicy('CorrectHorse9Battery')).toBe('password must include a special character');
    expect(checkPasswordPolicy('correcthorsebattery')).toBe(
      'password must include an upper-case letter, a digit and a special character',
    );
  });

  it('refuses control characters', () => {
    expect(checkPasswordPolicy('Correct-horse-9battery\n')).toBe(
      'password must not contain control characters',
    );
  });

  it('never repeats the password in its reason', () => {
    for (const pw of ['Short1!', 'nouppercase-123', 'NoDigitsHere-!!', 'NoSpecial123abc']) {
      expect(checkPasswordPolicy(pw)).not.toContain(pw);
    }
  });
});

describe('hashPassword / verifyPassword', () => {
  it('makes an argon2id PHC string with the default parameters (64 MiB, 3 passes, 1 lane) and a fresh salt', async () => {
    const a = await hashPassword(GOOD);
    const b = await hashPassword(GOOD);
    expect(a).toMatch(/^\$argon2id\$v=19\$m=65536,t=3,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
    expect(a).not.toBe(b);
    expect(a).not.toContain(GOOD);
  });

  it('verifies the right password and refuses a wrong one', async () => {
    const h = await hashPassword(GOOD);
    expect(await verifyPassword(h, GOOD)).toBe(true);
    expect(await verifyPassword(h, 'Correct-horse-9batterY')).toBe(false);
    expect(await verifyPassword(h, '')).toBe(false);
    expect(await verifyPassword(h, `${GOOD}${'x'.repeat(PASSWORD_MAX_LENGTH)}`)).toBe(false);
  });

  it('treats differently composed Unicode as the same password', async () => {
    const composed = 'Caf\u00e9-latte-2024!';
    const decomposed = 'Cafe\u0301-latte-2024!';
    expect(await verifyPassword(await hashPassword(composed), decomposed)).toBe(true);
  });

  it('still verifies hashes made with older parameters', async () => {
    expect(await verifyPassword(await hash(GOOD, { ...ARGON2_PARAMS, memoryCost: 4096 }), GOOD)).toBe(true);
  });

  it('answers false, not an exception, for a damaged stored hash', async () => {
    expect(await verifyPassword('not-a-hash', GOOD)).toBe(false);
    expect(await verifyPassword('$argon2id$v=19$m=19456,t=2,p=1$broken', GOOD)).toBe(false);
  });
});

describe('needsRehash', () => {
  it('is false for a hash with the current parameters and true otherwise', async () => {
    expect(needsRehash(await hashPassword(GOOD))).toBe(false);
    expect(needsRehash(await hash(GOOD, { ...ARGON2_PARAMS, memoryCost: 4096 }))).toBe(true);
    expect(needsRehash(await hash(GOOD, { ...ARGON2_PARAMS, timeCost: 2 }))).toBe(true);
    // The parameters before issue 16 (19 MiB, 2 passes): every such stored hash is rehashed.
    expect(needsRehash(await hash(GOOD, { ...ARGON2_PARAMS, memoryCost: 19456, timeCost: 2 }))).toBe(true);
    expect(needsRehash(await hash(GOOD, { ...ARGON2_PARAMS, algorithm: 1 as Algorithm }))).toBe(true);
    expect(needsRehash('$2b$10$abcdefghijklmnopqrstuv')).toBe(true);
    expect(needsRehash('')).toBe(true);
  });

  it('keeps a hash made with more memory or passes than configured (a rehash would weaken it)', async () => {
    expect(needsRehash(await hash(GOOD, { ...ARGON2_PARAMS, memoryCost: 2 * 65536 }))).toBe(false);
    expect(needsRehash(await hash(GOOD, { ...ARGON2_PARAMS, timeCost: 4 }))).toBe(false);
  });
});

describe('configurePasswordHashing', () => {
  afterEach(() => configurePasswordHashing(ARGON2_PARAMS));

  it('makes new hashes with at least 64 MiB by default', async () => {
    expect(ARGON2_PARAMS.memoryCost).toBeGreaterThanOrEqual(ARGON2_MIN_MEMORY_KIB);
    expect(ARGON2_MIN_MEMORY_KIB).toBe(64 * 1024);
    expect(await hashPassword(GOOD)).toContain('$argon2id$v=19$m=65536,t=3,p=1$');
  });

  it('uses the configured parameters for new hashes, the rehash test and the dummy check', async () => {
    const old = await hashPassword(GOOD);
    await configurePasswordHashing({ memoryCost: 65536, timeCost: 4, parallelism: 2 });
    expect(passwordHashParams()).toEqual({ memoryCost: 65536, timeCost: 4, parallelism: 2 });
    const made = await hashPassword(GOOD);
    expect(made).toContain('$m=65536,t=4,p=2$');
    expect(await verifyPassword(made, GOOD)).toBe(true);
    expect(needsRehash(old)).toBe(true);
    expect(needsRehash(made)).toBe(false);
    await expect(burnPasswordCheck(GOOD)).resolves.toBeUndefined();
  });

  it('refuses less than 64 MiB and keeps the parameters it had', async () => {
    await expect(
      configurePasswordHashing({ memoryCost: 19456, timeCost: 2, parallelism: 1 }),
    ).rejects.toThrow('at least 65536 KiB');
    expect(passwordHashParams()).toEqual({ memoryCost: 65536, timeCost: 3, parallelism: 1 });
  });
});

describe('burnPasswordCheck', () => {
  it('uses a dummy hash with the current parameters, so it costs what a real check costs', async () => {
    expect(needsRehash(DUMMY_PASSWORD_HASH)).toBe(false);
    expect(DUMMY_PASSWORD_HASH).toContain(
      `m=${ARGON2_PARAMS.memoryCost},t=${ARGON2_PARAMS.timeCost},p=${ARGON2_PARAMS.parallelism}`,
    );
    await expect(burnPasswordCheck()).resolves.toBeUndefined();
    await expect(burnPasswordCheck(GOOD)).resolves.toBeUndefined();
    expect(await verifyPassword(DUMMY_PASSWORD_HASH, '')).toBe(false);
  });
});
