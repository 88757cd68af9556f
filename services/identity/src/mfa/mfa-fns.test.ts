import { randomBytes } from 'node:crypto';
import { createCipheriv } from 'node:crypto';
import {
  classifyCode,
  isLegacySealed,
  openTotpSecret,
  resealLegacyTotpSecret,
  sealTotpSecret,
} from './mfa-fns';

const USER = '5b0e7c1e-2f7e-4d59-9a51-6f7b2f0c2a11';
const OTHER = '0f6f3d0a-9a33-4d2a-8a0e-5a1d2b3c4d5e';

/** A secret as identity sealed it before MFA_SECRET_KEY: format 1, under the token-signing KEK. */
function legacySeal(secret: Buffer, kek: Buffer, userId: string): Buffer {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', kek, iv);
  c.setAAD(Buffer.from(`custos-totp-secret:${userId}`, 'utf8'));
  const ct = Buffer.concat([c.update(secret), c.final()]);
  return Buffer.concat([Buffer.from([1]), iv, c.getAuthTag(), ct]);
}

describe('TOTP secrets sealed under the token-signing KEK (format 1)', () => {
  const user = '11111111-1111-4111-8111-111111111111';
  it('move to the MFA key, and the token KEK no longer opens them', () => {
    const tokenKek = randomBytes(32);
    const mfaKey = randomBytes(32);
    const secret = randomBytes(20);
    const legacy = legacySeal(secret, tokenKek, user);
    expect(isLegacySealed(legacy)).toBe(true);
    // The current format is not accepted in the old one (no silent fallback to the token KEK).
    expect(() => openTotpSecret(legacy, tokenKek, user)).toThrow();
    const moved = resealLegacyTotpSecret(legacy, tokenKek, mfaKey, user);
    expect(isLegacySealed(moved)).toBe(false);
    expect(openTotpSecret(moved, mfaKey, user).equals(secret)).toBe(true);
    expect(() => openTotpSecret(moved, tokenKek, user)).toThrow();
    expect(() => resealLegacyTotpSecret(legacy, randomBytes(32), mfaKey, user)).toThrow();
  });
});

describe('sealed TOTP secrets', () => {
  const kek = randomBytes(32);
  const secret = randomBytes(20);

  it('round-trips under the same key and user, and never holds the secret in clear', () => {
    const sealed = sealTotpSecret(secret, kek, USER);
    expect(sealed[0]).toBe(2);
    expect(sealed.length).toBe(1 + 12 + 16 + 20);
    expect(sealed.includes(secret)).toBe(false);
    expect(openTotpSecret(sealed, kek, USER).equals(secret)).toBe(true);
  });

  it('uses a fresh IV each time', () => {
    expect(sealTotpSecret(secret, kek, USER).equals(sealTotpSecret(secret, kek, USER))).toBe(false);
  });

  it('refuses another user, another key, altered bytes and an unknown format', () => {
    const sealed = sealTotpSecret(secret, kek, USER);
    expect(() => openTotpSecret(sealed, kek, OTHER)).toThrow();
    expect(() => openTotpSecret(sealed, randomBytes(32), USER)).toThrow();
    const flipped = Buffer.from(sealed);
    flipped[flipped.length - 1]! ^= 1;
    expect(() => openTotpSecret(flipped, kek, USER)).toThrow();
    const otherFormat = Buffer.from(sealed);
    otherFormat[0] = 3;
    expect(() => openTotpSecret(otherFormat, kek, USER)).toThrow('unknown sealed format');
    expect(() => openTotpSecret(sealed.subarray(0, 29), kek, USER)).toThrow('unknown sealed format');
  });
});

describe('classifyCode', () => {
  it('treats six digits (spaces ignored) as TOTP and anything else as a recovery code', () => {
    expect(classifyCode('123456')).toEqual({ kind: 'otp', code: '123456' });
    expect(classifyCode(' 123 456 ')).toEqual({ kind: 'otp', code: '123456' });
    expect(classifyCode('abcd-efgh-jkmn')).toEqual({ kind: 'recovery', code: 'abcd-efgh-jkmn' });
    expect(classifyCode('12345')).toEqual({ kind: 'recovery', code: '12345' });
    expect(classifyCode('１２３４５６')).toEqual({ kind: 'recovery', code: '１２３４５６' });
  });
});
