import { TARGETS, evaluateTarget, evaluateTargets, ratio } from './targets';

const run = (rps: number, p99: number, failed = 0) => ({
  rps,
  requests: rps * 20 + failed,
  ok: rps * 20,
  latency_ms: { p99 },
});

describe('evaluateTarget', () => {
  const read = TARGETS['agent-read']!;
  const headed = TARGETS['agent-read headed to']!;

  it('meets the agent-read target at 0.15 × pg with p99 at most 100 ms and nothing failed', () => {
    const r = evaluateTarget(read, run(1500, 100), 10000);
    expect(r).toMatchObject({
      met: true,
      needed_rps: 1500,
      per_pg_point_select: 0.15,
      p99_ms: 100,
      failed: 0,
    });
    expect(r.missed).toEqual([]);
  });

  it('names each part it misses: rate, p99, failures', () => {
    expect(evaluateTarget(read, run(1499, 80), 10000)).toMatchObject({
      met: false,
      missed: ['rate < 0.15 × pg'],
    });
    expect(evaluateTarget(read, run(2000, 100.01), 10000).missed).toEqual(['p99 > 100 ms']);
    expect(evaluateTarget(read, run(2000, 50, 3), 10000).missed).toEqual(['3 failed']);
    expect(evaluateTarget(read, run(218, 734, 1), 10000).missed).toHaveLength(3);
  });

  it('decides on the exact ratio, not the rounded one it reports', () => {
    // 1,499.6 / 10,000 rounds to 0.15 but is below it.
    const r = evaluateTarget(read, { ...run(1499.6, 10), ok: 1, requests: 1 }, 10000);
    expect(r.per_pg_point_select).toBe(0.15);
    expect(r.met).toBe(false);
  });

  it('holds the horizon to a strict p99 below 50 ms', () => {
    expect(evaluateTarget(headed, run(2600, 49.99), 10000).met).toBe(true);
    expect(evaluateTarget(headed, run(2600, 50), 10000).missed).toEqual(['p99 ≥ 50 ms']);
    expect(evaluateTarget(headed, run(2599, 10), 10000).met).toBe(false);
  });

  it('bounds no latency where the target does not', () => {
    expect(evaluateTarget(TARGETS['user-write']!, run(500, 5000), 10000).met).toBe(true);
    expect(evaluateTarget(TARGETS['agent-token']!, run(999, 1), 10000).met).toBe(false);
  });

  it('is not met when nothing succeeded, and unknown (null) without a run or a pg rate', () => {
    expect(evaluateTarget(read, { rps: 0, requests: 0, ok: 0, latency_ms: { p99: Number.NaN } }, 1).met).toBe(
      false,
    );
    expect(evaluateTarget(read, undefined, 10000)).toMatchObject({ met: null, needed_rps: 1500 });
    expect(evaluateTarget(read, run(1500, 1), 0)).toMatchObject({ met: null, needed_rps: null });
  });
});

describe('the signing horizon of issue 17', () => {
  const sign = TARGETS['sign-intent headed to']!;

  it('asks 1,000 signed intents/s and 0 failed, whatever the pg rate', () => {
    expect(sign).toMatchObject({ scenario: 'sign-intent', issue: 17, min_rps: 1000, kind: 'headed_to' });
    expect(evaluateTarget(sign, run(1000, 500), 50000)).toMatchObject({
      met: true,
      needed_rps: 1000,
      rps: 1000,
      missed: [],
    });
    expect(evaluateTarget(sign, run(999.9, 5), 100)).toMatchObject({ met: false, missed: ['rate < 1000/s'] });
    expect(evaluateTarget(sign, run(1500, 5, 1), 100).missed).toEqual(['1 failed']);
  });

  it('counts the failures a check after the run added, beyond the failed requests', () => {
    const r = { ...run(1500, 5), failed: 2 };
    expect(evaluateTarget(sign, r, 100)).toMatchObject({ met: false, failed: 2, missed: ['2 failed'] });
  });

  it('is judged without a pg rate, and unknown without a run', () => {
    expect(evaluateTarget(sign, run(1200, 5), 0)).toMatchObject({ met: true, per_pg_point_select: null });
    expect(evaluateTarget(sign, undefined, 10000)).toMatchObject({ met: null, needed_rps: 1000, rps: null });
  });
});

describe('evaluateTargets', () => {
  it('judges every target, a scenario that failed to set up as not run', () => {
    const r = evaluateTargets(
      { 'agent-read': run(1600, 90), 'user-write': { error: 'sign up: 500' }, 'agent-token': run(900, 30) },
      10000,
    );
    expect(Object.keys(r)).toEqual([
      'agent-read',
      'user-write',
      'agent-token',
      'agent-read headed to',
      'sign-intent headed to',
    ]);
    expect(r['agent-read']!.met).toBe(true);
    expect(r['user-write']!.met).toBeNull();
    expect(r['agent-token']!.met).toBe(false);
    expect(r['agent-read headed to']!.met).toBe(false);
    expect(r['sign-intent headed to']!.met).toBeNull();
  });
});

describe('ratio', () => {
  it('rounds to three decimals and is null without a pg rate', () => {
    expect(ratio(218, 11333)).toBe(0.019);
    expect(ratio(1, 0)).toBeNull();
  });
});
