/**
 * One target: a scenario's rate as a share of the pg point-select rate of the same run (issue 14),
 * or as requests per second on the machine the targets are stated for (issue 17's signing horizon).
 */
export interface Target {
  scenario: string;
  /** The issue that set it. */
  issue: number;
  /** Successful requests/s ÷ pg point-select ops/s, at least. */
  min_per_pg_point_select?: number;
  /** Successful requests/s, at least (stated for TARGET_CONDITIONS' machine). */
  min_rps?: number;
  /** p99 latency in ms, at most (inclusive), when the target bounds it. */
  max_p99_ms?: number;
  /** p99 latency in ms, below (strict), when the target bounds it. */
  p99_ms_below?: number;
  /** What the target is for: the issue's bar, or where the project is headed after it. */
  kind: 'target' | 'headed_to';
}

/**
 * The targets of issue 14 (2-core machine, 64 connections, ratios to the same run's pg point-select)
 * and where issue 17 says signing is headed (1,000 signed intents/s on that machine: ethers signs an
 * EIP-1559 transaction in about 0.7 ms per core). Every one also needs a run without a failed
 * request: the rate counts only 2xx answers, and a run with refusals is not a figure to quote.
 */
export const TARGETS: Readonly<Record<string, Target>> = {
  'agent-read': {
    scenario: 'agent-read',
    issue: 14,
    min_per_pg_point_select: 0.15,
    max_p99_ms: 100,
    kind: 'target',
  },
  'user-write': { scenario: 'user-write', issue: 14, min_per_pg_point_select: 0.05, kind: 'target' },
  'agent-token': { scenario: 'agent-token', issue: 14, min_per_pg_point_select: 0.1, kind: 'target' },
  'agent-read headed to': {
    scenario: 'agent-read',
    issue: 14,
    min_per_pg_point_select: 0.26,
    p99_ms_below: 50,
    kind: 'headed_to',
  },
  'sign-intent headed to': { scenario: 'sign-intent', issue: 17, min_rps: 1000, kind: 'headed_to' },
};

/** The machine and load the targets are stated for. */
export const TARGET_CONDITIONS = { machine_cpus: 2, concurrency: 64 } as const;

/** What a scenario measured, as far as the targets care. */
export interface Measured {
  rps: number;
  requests: number;
  ok: number;
  /** Failed requests plus what the check after the run could not account for (report `failed`). */
  failed?: number;
  latency_ms: { p99: number };
}

/** A target beside this run's figures; `met` is null when the scenario did not run or failed to set up. */
export interface TargetResult extends Target {
  /** The rate the target asks for (for a ratio, with this run's pg point-select rate). */
  needed_rps: number | null;
  rps: number | null;
  per_pg_point_select: number | null;
  p99_ms: number | null;
  failed: number | null;
  met: boolean | null;
  /** Which parts were missed, in words (empty when met or not run). */
  missed: string[];
}

/** Rounds a ratio as the results file does (three decimals). */
export function ratio(rps: number, pgOpsPerS: number): number | null {
  return pgOpsPerS > 0 ? Math.round((rps / pgOpsPerS) * 1000) / 1000 : null;
}

/** Judges one target against a scenario's figures (undefined: not run) and the pg rate of the run. */
export function evaluateTarget(
  target: Target,
  measured: Measured | undefined,
  pgOpsPerS: number,
): TargetResult {
  const share = target.min_per_pg_point_select;
  const needed =
    target.min_rps !== undefined
      ? target.min_rps
      : share !== undefined && pgOpsPerS > 0
        ? Math.ceil(share * pgOpsPerS)
        : null;
  if (!measured || needed === null) {
    return {
      ...target,
      needed_rps: needed,
      rps: null,
      per_pg_point_select: null,
      p99_ms: null,
      failed: null,
      met: null,
      missed: [],
    };
  }
  const p99 = measured.latency_ms.p99;
  const failed = measured.failed ?? measured.requests - measured.ok;
  const missed: string[] = [];
  // The exact ratio decides, not the rounded one the file shows.
  if (share !== undefined && !(measured.rps / pgOpsPerS >= share)) missed.push(`rate < ${share} × pg`);
  if (target.min_rps !== undefined && !(measured.rps >= target.min_rps))
    missed.push(`rate < ${target.min_rps}/s`);
  if (target.max_p99_ms !== undefined && !(p99 <= target.max_p99_ms))
    missed.push(`p99 > ${target.max_p99_ms} ms`);
  if (target.p99_ms_below !== undefined && !(p99 < target.p99_ms_below))
    missed.push(`p99 ≥ ${target.p99_ms_below} ms`);
  if (failed > 0 || measured.ok === 0) missed.push(`${failed} failed`);
  return {
    ...target,
    needed_rps: needed,
    rps: measured.rps,
    per_pg_point_select: ratio(measured.rps, pgOpsPerS),
    p99_ms: Number.isFinite(p99) ? p99 : null,
    failed,
    met: missed.length === 0,
    missed,
  };
}

/** Every target of `targets` against the scenarios of a run (those with an error count as not run). */
export function evaluateTargets(
  scenarios: Record<string, Measured | { error: string }>,
  pgOpsPerS: number,
  targets: Readonly<Record<string, Target>> = TARGETS,
): Record<string, TargetResult> {
  const out: Record<string, TargetResult> = {};
  for (const [name, t] of Object.entries(targets)) {
    const s = scenarios[t.scenario];
    out[name] = evaluateTarget(t, s && !('error' in s) ? s : undefined, pgOpsPerS);
  }
  return out;
}
