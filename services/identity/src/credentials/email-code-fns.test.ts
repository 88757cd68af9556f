import { generateEmailCode, emailCodeMatches, hashEmailCode } from './email-code-fns';

describe('generateEmailCode', () => {
  it('makes 6-digit codes, leading zeros included, spread over the whole range', () => {
    const codes = Array.from({ length: 5000 }, generateEmailCode);
    for (const c of codes) expect(c).toMatch(/^[0-9]{6}$/);
    expect(new Set(codes.map((c) => c[0])).size).toBe(10);
    expect(new Set(codes).size).toBeGreaterThan(4900);
  });
});

describe('hashEmailCode / emailCodeMatches', () => {
  it('matches the right code and refuses any other', () => {
    const hash = hashEmailCode('042917');
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(hash).not.toContain('042917');
    expect(emailCodeMatches('042917', hash)).toBe(true);
    expect(emailCodeMatches(' 042 917 ', hash)).toBe(true);
    expect(emailCodeMatches('042918', hash)).toBe(false);
    expect(emailCodeMatches('42917', hash)).toBe(false);
    expect(emailCodeMatches('0429170', hash)).toBe(false);
    expect(emailCodeMatches('04291a', hash)).toBe(false);
    expect(emailCodeMatches('', hash)).toBe(false);
    expect(emailCodeMatches('042917', 'not-a-hash')).toBe(false);
  });

  it('refuses to hash something that is not a code', () => {
    expect(() => hashEmailCode('12345')).toThrow('not a 6-digit code');
  });
});
