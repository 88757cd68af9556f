import type { CpuUsage } from './cpu.js';
import type { LoadResult } from './load.js';
import type { ScenarioCheck } from './scenario-fns.js';
import type { TargetResult } from './targets.js';

/** A scenario as the results file holds it. */
export interface ScenarioResult extends LoadResult {
  description: string;
  per_pg_point_select: number | null;
  /** Rate ÷ each of the scenario's own bare ceilings (scenario-fns SCENARIO_CEILINGS), if it has any. */
  per_ceiling?: Record<string, number | null>;
  /**
   * Failed requests (`requests − ok`: refused, unanswered, or a 2xx whose body the scenario
   * refused) plus, when the check after the run found the run inconsistent, its discrepancies
   * (scenario-fns `checkFailures`). Absent from results files written before issue 17's fix.
   */
  failed?: number;
  /** What the scenario's check after the run found (e.g. broadcast transfers all mined). */
  check?: ScenarioCheck;
  cpu: CpuUsage | undefined;
}

/** A number with thousands separators and at most `digits` decimals; '-' when not finite. */
export const fmt = (n: number, digits = 0) =>
  Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits }) : '-';

/** Lines of a text table: the first `left` columns left-aligned, the others right-aligned. */
export function table(rows: string[][], left = 1): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) =>
    widths
      .map((w, i) => (i < left ? (r[i] ?? '').padEnd(w) : (r[i] ?? '').padStart(w)))
      .join('  ')
      .trimEnd(),
  );
}

/** A scenario's failures: `failed` when the file has it, else its failed requests. */
export const failedOf = (s: Pick<ScenarioResult, 'requests' | 'ok' | 'failed'>): number =>
  s.failed ?? s.requests - s.ok;

/** The rate and latency table: one row per scenario. */
export function resultTable(scenarios: Record<string, ScenarioResult | { error: string }>): string[] {
  const rows = [['scenario', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'failed', '÷ pg']];
  for (const [n, s] of Object.entries(scenarios)) {
    if ('error' in s) {
      rows.push([n, 'error']);
      continue;
    }
    const l = s.latency_ms;
    rows.push([
      n,
      fmt(s.rps),
      fmt(l.p50, 1),
      fmt(l.p90, 1),
      fmt(l.p99, 1),
      fmt(l.max, 1),
      fmt(failedOf(s)),
      fmt(s.per_pg_point_select ?? NaN, 3),
    ]);
  }
  return table(rows);
}

const TOTALS = ['mesh_total', 'machine_total'];

/**
 * CPU µs per request: one column per scenario, one row per process (the busiest of any scenario
 * first), then `other` and the totals. Empty when no scenario has the figures (not Linux).
 */
export function cpuTable(scenarios: Record<string, ScenarioResult | { error: string }>): string[] {
  const measured = Object.entries(scenarios).filter(
    (e): e is [string, ScenarioResult & { cpu: { us_per_request: Record<string, number> } }] =>
      !('error' in e[1]) &&
      e[1].cpu?.us_per_request !== undefined &&
      'machine_total' in e[1].cpu.us_per_request,
  );
  if (measured.length === 0) return [];
  const peak = new Map<string, number>();
  for (const [, s] of measured) {
    for (const [label, us] of Object.entries(s.cpu.us_per_request)) {
      if (label === 'other' || TOTALS.includes(label)) continue;
      peak.set(label, Math.max(peak.get(label) ?? 0, us));
    }
  }
  const labels = [...peak.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map((e) => e[0]);
  const rows = [['CPU µs/request', ...measured.map(([n]) => n)]];
  for (const label of [...labels, 'other', ...TOTALS]) {
    rows.push([label, ...measured.map(([, s]) => fmt(s.cpu.us_per_request[label] ?? NaN))]);
  }
  return table(rows);
}

/** One line per target: what it asks, what this run did, met or not. */
export function targetLines(targets: Record<string, TargetResult>): string[] {
  const rows: string[][] = [];
  for (const [name, t] of Object.entries(targets)) {
    const share = t.min_per_pg_point_select;
    const asks = [
      ...(share !== undefined
        ? [`≥ ${share} × pg` + (t.needed_rps !== null ? ` (${fmt(t.needed_rps)}/s)` : '')]
        : []),
      ...(t.min_rps !== undefined ? [`≥ ${fmt(t.min_rps)}/s`] : []),
      ...(t.max_p99_ms !== undefined ? [`p99 ≤ ${t.max_p99_ms} ms`] : []),
      ...(t.p99_ms_below !== undefined ? [`p99 < ${t.p99_ms_below} ms`] : []),
      '0 failed',
    ].join(', ');
    const rate =
      share !== undefined ? `${fmt(t.per_pg_point_select ?? NaN, 3)} × pg` : `${fmt(t.rps ?? NaN)}/s`;
    const did =
      t.met === null
        ? 'not run'
        : `${rate}, p99 ${fmt(t.p99_ms ?? NaN, 1)} ms, ${fmt(t.failed ?? NaN)} failed`;
    const verdict = t.met === null ? '-' : t.met ? 'met' : `NOT met (${t.missed.join('; ')})`;
    rows.push([`${name} (#${t.issue})`, asks, did, verdict]);
  }
  return table([['target', 'asks', 'this run', ''], ...rows], 4);
}

/**
 * One line per scenario with a check after the run: what it found, `INCONSISTENT` in capitals when
 * it failed the scenario.
 */
export function checkLines(scenarios: Record<string, ScenarioResult | { error: string }>): string[] {
  const out: string[] = [];
  for (const [n, s] of Object.entries(scenarios)) {
    if ('error' in s || !s.check) continue;
    const { consistent, discrepancies, ...rest } = s.check;
    const detail = Object.entries(rest)
      .map(
        ([k, v]) =>
          `${k} ${typeof v === 'number' ? fmt(v) : typeof v === 'object' ? JSON.stringify(v) : String(v)}`,
      )
      .join(', ');
    out.push(
      consistent
        ? `${n}: check after the run consistent (${detail})`
        : `${n}: check after the run INCONSISTENT, ${fmt(discrepancies)} unaccounted for: failed (${detail})`,
    );
  }
  return out;
}
