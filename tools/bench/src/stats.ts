/** Summary of a set of latencies, in milliseconds. */
export interface LatencySummary {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/**
 * The nearest-rank percentile of an ascending array: the smallest value such that at least `p` % of
 * the values are at or below it. `p` is in [0, 100]; an empty array gives NaN.
 */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile out of range: ${p}`);
  const n = sorted.length;
  if (n === 0) return Number.NaN;
  const rank = Math.max(1, Math.ceil((p / 100) * n));
  return sorted[rank - 1]!;
}

/** Sorts a copy of the latencies and summarizes them (values rounded to 0.01 ms). */
export function summarize(latenciesMs: ArrayLike<number>): LatencySummary {
  const sorted = Float64Array.from(latenciesMs).sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  const round = (v: number) => (Number.isNaN(v) ? v : Math.round(v * 100) / 100);
  return {
    count: sorted.length,
    mean: round(sorted.length ? sum / sorted.length : Number.NaN),
    p50: round(percentile(sorted, 50)),
    p90: round(percentile(sorted, 90)),
    p99: round(percentile(sorted, 99)),
    max: round(sorted.length ? sorted[sorted.length - 1]! : Number.NaN),
  };
}
