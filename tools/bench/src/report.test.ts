import { type ScenarioResult, checkLines, cpuTable, resultTable, table, targetLines } from './report';
import { TARGETS, evaluateTargets } from './targets';

const scenario = (rps: number, us: Record<string, number> | undefined): ScenarioResult => ({
  description: '',
  concurrency: 64,
  seconds: 20,
  requests: rps * 20,
  ok: rps * 20,
  rps,
  statuses: { '200': rps * 20 },
  latency_ms: { count: rps * 20, mean: 1, p50: 1, p90: 2, p99: 3, max: 4 },
  per_pg_point_select: 0.1,
  cpu: us && {
    machine_busy_fraction: 1,
    machine_busy_cores: 2,
    processes_cores: {},
    other_cores: 0,
    us_per_request: us,
  },
});

describe('table', () => {
  it('pads the first column to the left and the others to the right', () => {
    expect(
      table([
        ['a', 'bb'],
        ['ccc', 'd'],
      ]),
    ).toEqual(['a    bb', 'ccc   d']);
    expect(
      table(
        [
          ['x', 'y', 'z'],
          ['long', 'w'],
        ],
        2,
      ),
    ).toEqual(['x     y  z', 'long  w']);
  });
});

describe('cpuTable', () => {
  it('has a column per measured scenario and the busiest processes first, totals last', () => {
    const lines = cpuTable({
      'agent-read': scenario(1000, {
        gateway: 300,
        policy: 100,
        other: 5,
        mesh_total: 400,
        machine_total: 420,
      }),
      'user-write': scenario(500, {
        gateway: 200,
        policy: 900,
        other: 0,
        mesh_total: 1100,
        machine_total: 1100,
      }),
      mixed: { error: 'set-up failed' },
    });
    expect(lines.map((l) => l.split(/\s+/)[0])).toEqual([
      'CPU',
      'policy',
      'gateway',
      'other',
      'mesh_total',
      'machine_total',
    ]);
    expect(lines[0]).toContain('agent-read');
    expect(lines[0]).not.toContain('mixed');
    expect(lines[1]!.split(/\s+/)).toEqual(['policy', '100', '900']);
    expect(lines[5]!.split(/\s+/)).toEqual(['machine_total', '420', '1,100']);
  });

  it('is empty when no scenario has CPU figures', () => {
    expect(cpuTable({ 'agent-read': scenario(1000, undefined) })).toEqual([]);
  });
});

describe('targetLines', () => {
  it('says what each target asks, what the run did and whether it is met', () => {
    const lines = targetLines(
      evaluateTargets(
        { 'agent-read': { rps: 2000, requests: 40000, ok: 40000, latency_ms: { p99: 60 } } },
        10000,
      ),
    );
    expect(lines).toHaveLength(1 + Object.keys(TARGETS).length);
    const read = lines.find((l) => l.startsWith('agent-read '))!;
    expect(read).toContain('≥ 0.15 × pg (1,500/s), p99 ≤ 100 ms, 0 failed');
    expect(read).toContain('0.2 × pg, p99 60 ms, 0 failed');
    expect(read.trimEnd().endsWith('met')).toBe(true);
    expect(lines.find((l) => l.startsWith('agent-read headed to'))).toContain(
      'NOT met (rate < 0.26 × pg; p99 ≥ 50 ms)',
    );
    expect(lines.find((l) => l.startsWith('user-write'))).toContain('not run');
    expect(read).toContain('agent-read (#14)');
  });

  it('states the signing horizon as a rate, not a share of pg', () => {
    const lines = targetLines(
      evaluateTargets(
        { 'sign-intent': { rps: 640, requests: 12800, ok: 12800, latency_ms: { p99: 140 } } },
        20000,
      ),
    );
    const sign = lines.find((l) => l.startsWith('sign-intent headed to (#17)'))!;
    expect(sign).toContain('≥ 1,000/s, 0 failed');
    expect(sign).toContain('640/s, p99 140 ms, 0 failed');
    expect(sign).toContain('NOT met (rate < 1000/s)');
    expect(sign).not.toContain('× pg');
  });
});

describe('failures and checks', () => {
  const transfer = (check: ScenarioResult['check'], failed?: number): ScenarioResult => ({
    ...scenario(50, undefined),
    ...(failed !== undefined ? { failed } : {}),
    check,
  });

  it('shows the failed column from `failed`, or from requests − ok in older files', () => {
    const withCheck = resultTable({ 'eth-transfer': transfer(undefined, 7) });
    expect(withCheck[1]!.split(/\s+/)[6]).toBe('7');
    const older = { ...scenario(50, undefined), ok: 990 };
    expect(resultTable({ 'eth-transfer': older })[1]!.split(/\s+/)[6]).toBe('10');
  });

  it('says INCONSISTENT and how many were unaccounted for when the check failed the scenario', () => {
    const lines = checkLines({
      ok: transfer({ consistent: true, discrepancies: 0, answered_sent: 1000, mined_transfers: 1000 }),
      bad: transfer({
        consistent: false,
        discrepancies: 3,
        answered_sent: 1000,
        mined_transfers: 997,
        refused_answers: { 'status failed': 2 },
      }),
      none: scenario(10, undefined),
      broken: { error: 'set-up failed' },
    });
    expect(lines).toEqual([
      'ok: check after the run consistent (answered_sent 1,000, mined_transfers 1,000)',
      'bad: check after the run INCONSISTENT, 3 unaccounted for: failed (answered_sent 1,000, mined_transfers 997, refused_answers {"status failed":2})',
    ]);
  });
});
