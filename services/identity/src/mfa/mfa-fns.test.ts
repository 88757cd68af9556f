import { randomBytes } from 'node:crypto';
import { classifyCode, openTotpSecret, sealTotpSecret } from './mfa-fns';

const USER = '5b0e7c1e-2f7e-4d59-9a51-6f7b2f0c2a11';
const OTHER = '0f6f3d0a-9a33-4d2a-8a0e-5a1d2b3c4d5e';

describe('sealed TOTP secrets', () => {
  const kek = randomBytes(32);
  const secret = randomBytes(20);

  it('round-trips under the same key and user, and never holds the secret in clear', () => {
    const sealed = sealTotpSecret(secret, kek, USER);
    expect(sealed[0]).toBe(1);
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
    otherFormat[0] = 2;
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
