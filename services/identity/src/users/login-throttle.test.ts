import { AccountLockedError, failureDelayMs } from './login-throttle';

describe('failureDelayMs', () => {
  const o = {
    threshold: 10,
    windowSeconds: 900,
    lockSeconds: 900,
    freeFailures: 3,
    baseDelayMs: 250,
    maxDelayMs: 2000,
  };

  it('answers the first failures at once, then doubles the delay up to the cap', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 20].map((n) => failureDelayMs(n, o))).toEqual([
      0, 0, 0, 250, 500, 1000, 2000, 2000, 2000,
    ]);
  });

  it('never overflows for a huge count', () => {
    expect(failureDelayMs(10_000, o)).toBe(2000);
  });
});

describe('AccountLockedError', () => {
  it('is a 429 account_locked with a Retry-After of at least a second', () => {
    const e = new AccountLockedError(0);
    expect(e.httpStatus).toBe(429);
    expect(e.type).toBe('account_locked');
    expect(e.extensions['retry_after']).toBe('1');
  });
});
