import { retryAfterSeconds, wrongSecretVerdict } from './wrong-secret-fns';

describe('wrong-secret verdicts', () => {
  it('audits up to the limit, limits once with a record, then limits without one', () => {
    expect([1, 19, 20, 21, 22, 500].map((n) => wrongSecretVerdict(n, 20))).toEqual([
      'audit',
      'audit',
      'audit',
      'limit',
      'limited',
      'limited',
    ]);
    expect(wrongSecretVerdict(2, 1)).toBe('limit');
  });

  it('audits when the count is unknown (Redis did not answer)', () => {
    expect(wrongSecretVerdict(Number.NaN, 20)).toBe('audit');
  });

  it('tells when the minute ends, never 0 and never past the window', () => {
    expect(retryAfterSeconds(59_001, 60_000)).toBe(60);
    expect(retryAfterSeconds(1, 60_000)).toBe(1);
    expect(retryAfterSeconds(-1, 60_000)).toBe(60);
    expect(retryAfterSeconds(120_000, 60_000)).toBe(60);
  });
});
