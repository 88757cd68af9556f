import { TOTP, URI } from 'otpauth';
import {
  base32Decode,
  base32Encode,
  findRecoveryCode,
  generateRecoveryCodes,
  generateTotpSecret,
  hashRecoveryCode,
  otpauthUri,
  recoveryCodeMatches,
  totpCode,
  totpStep,
  verifyTotp,
} from './totp-fns';

// RFC 6238 Appendix B, SHA-1: the ASCII key "12345678901234567890".
const RFC_SECRET = base32Encode(Buffer.from('12345678901234567890', 'ascii'));
const RFC_VECTORS: Array<[number, string]> = [
  [59, '94287082'],
  [1111111109, '07081804'],
  [1111111111, '14050471'],
  [1234567890, '89005924'],
  [2000000000, '69279037'],
  [20000000000, '65353130'],
];

describe('base32', () => {
  it('encodes as RFC 4648 without padding and decodes back', () => {
    expect(base32Encode(Buffer.from('foobar'))).toBe('MZXW6YTBOI');
    expect(base32Encode(Buffer.from('f'))).toBe('MY');
    expect(RFC_SECRET).toBe('GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ');
    expect(base32Decode('mzxw6ytboi').toString()).toBe('foobar');
    expect(base32Decode('MZXW6YQ=').toString()).toBe('foob');
    expect(() => base32Decode('MZXW1')).toThrow();
  });
});

describe('TOTP (RFC 6238, SHA-1)', () => {
  it.each(RFC_VECTORS)('matches the RFC test vector at T=%i', (seconds, expected) => {
    const step = totpStep(seconds * 1000);
    expect(totpCode(RFC_SECRET, step, 8)).toBe(expected);
    expect(totpCode(RFC_SECRET, step)).toBe(expected.slice(-6));
    expect(verifyTotp(RFC_SECRET, expected.slice(-6), seconds * 1000)).toBe(step);
  });

  it('generates 20-byte secrets as 32 base32 characters', () => {
    const s = generateTotpSecret();
    expect(s).toMatch(/^[A-Z2-7]{32}$/);
    expect(base32Decode(s)).toHaveLength(20);
    expect(generateTotpSecret()).not.toBe(s);
  });
});

describe('verifyTotp', () => {
  // Fixed secret and time, so that the codes of neighbouring steps are known not to collide.
  const secret = RFC_SECRET;
  const now = 1_700_000_000_000;
  const step = totpStep(now);
  const near = [step - 1, step, step + 1].map((s) => totpCode(secret, s));

  it('has distinct codes around the test time (precondition of the tests below)', () => {
    expect(new Set([...near, totpCode(secret, step - 2), totpCode(secret, step + 2)]).size).toBe(5);
  });

  it('accepts the current step and one step of drift either way, and says which', () => {
    expect(verifyTotp(secret, near[1]!, now)).toBe(step);
    expect(verifyTotp(secret, near[0]!, now)).toBe(step - 1);
    expect(verifyTotp(secret, near[2]!, now)).toBe(step + 1);
    // The step boundaries: the last and first millisecond of the current step.
    expect(verifyTotp(secret, near[0]!, step * 30_000)).toBe(step - 1);
    expect(verifyTotp(secret, near[2]!, step * 30_000 + 29_999)).toBe(step + 1);
  });

  it('refuses codes two steps away', () => {
    expect(verifyTotp(secret, totpCode(secret, step - 2), now)).toBeUndefined();
    expect(verifyTotp(secret, totpCode(secret, step + 2), now)).toBeUndefined();
  });

  it('refuses a wrong code and the code of another secret', () => {
    const wrong = String((Number(near[1]) + 1) % 1_000_000).padStart(6, '0');
    expect(near).not.toContain(wrong);
    expect(verifyTotp(secret, wrong, now)).toBeUndefined();
    const other = base32Encode(Buffer.from('another-secret-of-20'));
    expect(near).not.toContain(totpCode(other, step));
    expect(verifyTotp(secret, totpCode(other, step), now)).toBeUndefined();
  });

  it('refuses a replay: a step at or before the last used one', () => {
    const used = verifyTotp(secret, near[1]!, now);
    expect(used).toBe(step);
    expect(verifyTotp(secret, near[1]!, now, used)).toBeUndefined();
    expect(verifyTotp(secret, near[1]!, now + 20_000, used)).toBeUndefined();
    expect(verifyTotp(secret, near[0]!, now, used)).toBeUndefined();
    expect(verifyTotp(secret, near[2]!, now, used)).toBe(step + 1);
  });

  it('refuses anything but six ASCII digits', () => {
    const code = near[1]!;
    for (const bad of [
      code.slice(1),
      `${code}0`,
      ` ${code}`,
      `${code.slice(0, 3)} ${code.slice(3)}`,
      '١٢٣٤٥٦',
      '',
    ]) {
      expect(verifyTotp(secret, bad, now)).toBeUndefined();
    }
    expect(verifyTotp(secret, Number(code) as unknown as string, now)).toBeUndefined();
  });

  it('refuses with an unusable secret instead of throwing', () => {
    expect(verifyTotp('not base32!', '123456', now)).toBeUndefined();
    expect(verifyTotp('', '123456', now)).toBeUndefined();
  });
});

describe('otpauthUri', () => {
  it('spells out issuer, secret, algorithm, digits and period', () => {
    const uri = otpauthUri({ issuer: 'Custos Dev', account: 'ada@example.org', secretBase32: RFC_SECRET });
    expect(uri).toBe(
      'otpauth://totp/Custos%20Dev:ada%40example.org?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ' +
        '&issuer=Custos%20Dev&algorithm=SHA1&digits=6&period=30',
    );
    // otpauth's parser reads it back with the same parameters.
    const parsed = URI.parse(uri) as TOTP;
    expect(parsed).toBeInstanceOf(TOTP);
    expect([parsed.issuer, parsed.label, parsed.secret.base32, parsed.digits, parsed.period]).toEqual([
      'Custos Dev',
      'ada@example.org',
      RFC_SECRET,
      6,
      30,
    ]);
  });
});

describe('recovery codes', () => {
  it('makes n distinct unambiguous codes and their hashes', () => {
    const { codes, hashes } = generateRecoveryCodes();
    expect(codes).toHaveLength(10);
    expect(new Set(codes).size).toBe(10);
    for (const c of codes) expect(c).toMatch(/^[a-hjkmnp-z2-9]{4}-[a-hjkmnp-z2-9]{4}-[a-hjkmnp-z2-9]{4}$/);
    expect(hashes).toEqual(codes.map(hashRecoveryCode));
    expect(generateRecoveryCodes(3).codes).toHaveLength(3);
  });

  it('matches a code typed in any case, with or without hyphens, and nothing else', () => {
    const { codes, hashes } = generateRecoveryCodes(2);
    const code = codes[0]!;
    expect(recoveryCodeMatches(code, hashes[0]!)).toBe(true);
    expect(recoveryCodeMatches(code.toUpperCase().replace(/-/g, ''), hashes[0]!)).toBe(true);
    expect(recoveryCodeMatches(` ${code.replace(/-/g, ' ')} `, hashes[0]!)).toBe(true);
    expect(recoveryCodeMatches(code, hashes[1]!)).toBe(false);
    expect(recoveryCodeMatches(code.slice(0, -1), hashes[0]!)).toBe(false);
    expect(recoveryCodeMatches(`${code.slice(0, -1)}${code.endsWith('a') ? 'b' : 'a'}`, hashes[0]!)).toBe(
      false,
    );
  });

  it('finds which stored code was used', () => {
    const { codes, hashes } = generateRecoveryCodes(5);
    expect(findRecoveryCode(codes[3]!, hashes)).toBe(3);
    expect(findRecoveryCode(generateRecoveryCodes(1).codes[0]!, hashes)).toBe(-1);
    expect(findRecoveryCode('not a code', hashes)).toBe(-1);
  });
});
