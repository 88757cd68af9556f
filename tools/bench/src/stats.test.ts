import { percentile, summarize } from './stats';

describe('percentile (nearest rank)', () => {
  const hundred = Array.from({ length: 100 }, (_, i) => i + 1);

  it('returns the value at the nearest rank of an ascending array', () => {
    expect(percentile(hundred, 50)).toBe(50);
    expect(percentile(hundred, 90)).toBe(90);
    expect(percentile(hundred, 99)).toBe(99);
    expect(percentile(hundred, 100)).toBe(100);
    expect(percentile(hundred, 0)).toBe(1);
    expect(percentile(hundred, 99.5)).toBe(100);
  });

  it('rounds the rank up, so a small sample reports its worse value', () => {
    expect(percentile([10, 20, 30], 50)).toBe(20);
    expect(percentile([10, 20, 30, 40], 50)).toBe(20);
    expect(percentile([10, 20, 30, 40], 51)).toBe(30);
    expect(percentile([10, 20], 99)).toBe(20);
    expect(percentile([7], 1)).toBe(7);
  });

  it('is NaN for no values and refuses a percentile outside [0, 100]', () => {
    expect(percentile([], 50)).toBeNaN();
    expect(() => percentile([1], 101)).toThrow(RangeError);
    expect(() => percentile([1], -1)).toThrow(RangeError);
    expect(() => percentile([1], Number.NaN)).toThrow(RangeError);
  });
});

describe('summarize', () => {
  it('sorts numerically (not as strings) without changing its input', () => {
    const input = [100, 9, 20, 3, 1000];
    expect(summarize(input)).toEqual({ count: 5, mean: 226.4, p50: 20, p90: 1000, p99: 1000, max: 1000 });
    expect(input).toEqual([100, 9, 20, 3, 1000]);
  });

  it('reports NaN statistics for an empty sample', () => {
    const s = summarize([]);
    expect(s.count).toBe(0);
    expect(s.p50).toBeNaN();
    expect(s.max).toBeNaN();
  });
});
