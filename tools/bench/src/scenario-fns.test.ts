import {
  SCENARIO_CEILINGS,
  ceilingRatios,
  checkFailures,
  mixedPick,
  serviceEnvOf,
  transferCheck,
} from './scenario-fns';

describe('mixedPick', () => {
  const shape = { orgs: 4, agentsPerOrg: 3, paths: 64, writeEvery: 10 };
  const cycle = shape.orgs * shape.agentsPerOrg * shape.paths * shape.writeEvery;

  it('makes exactly one request in ten a write, the last of each block of ten', () => {
    const picks = Array.from({ length: 100 }, (_, i) => mixedPick(i, shape));
    expect(picks.filter((p) => p.write)).toHaveLength(10);
    expect(picks.map((p, i) => (p.write ? i : -1)).filter((i) => i >= 0)).toEqual([
      9, 19, 29, 39, 49, 59, 69, 79, 89, 99,
    ]);
  });

  it('reads each (org, agent, path) nine times and writes it once over one cycle', () => {
    const counts = new Map<string, { reads: number; writes: number }>();
    for (let i = 0; i < cycle; i++) {
      const p = mixedPick(i, shape);
      const key = `${p.org}/${p.agent}/${p.path}`;
      const c = counts.get(key) ?? { reads: 0, writes: 0 };
      if (p.write) c.writes++;
      else c.reads++;
      counts.set(key, c);
    }
    expect(counts.size).toBe(4 * 3 * 64);
    for (const c of counts.values()) expect(c).toEqual({ reads: 9, writes: 1 });
  });

  it('spreads writes over every org, not only those of one parity', () => {
    const writesPerOrg = [0, 0, 0, 0];
    for (let i = 0; i < 400; i++) {
      const p = mixedPick(i, shape);
      if (p.write) writesPerOrg[p.org]!++;
    }
    expect(writesPerOrg).toEqual([10, 10, 10, 10]);
  });

  it('stays within the shape and repeats after one cycle', () => {
    for (const i of [0, 1, 767, 7679, 123_456]) {
      const p = mixedPick(i, shape);
      expect(p.org).toBeLessThan(4);
      expect(p.agent).toBeLessThan(3);
      expect(p.path).toBeLessThan(64);
      expect(mixedPick(i + cycle, shape)).toEqual(p);
    }
    expect(mixedPick(10, shape)).toEqual({ org: 1, agent: 0, path: 0, write: false });
    expect(mixedPick(40, shape)).toEqual({ org: 0, agent: 1, path: 0, write: false });
    expect(mixedPick(120, shape)).toEqual({ org: 0, agent: 0, path: 1, write: false });
  });
});

describe('serviceEnvOf', () => {
  it('reads NAME=value pairs and refuses anything else', () => {
    expect(serviceEnvOf(undefined)).toEqual({});
    expect(serviceEnvOf(' POLICY_DECISION_CACHE_TTL_MS=0 , A_B=x=y ')).toEqual({
      POLICY_DECISION_CACHE_TTL_MS: '0',
      A_B: 'x=y',
    });
    expect(() => serviceEnvOf('lower=1')).toThrow(/not NAME=value/);
    expect(() => serviceEnvOf('NOVALUE')).toThrow(/not NAME=value/);
  });
});

describe('ceilingRatios', () => {
  it('divides a signing scenario’s rate by each of its own ceilings, null for one not measured', () => {
    expect(
      ceilingRatios('sign-intent', 500, {
        ethers_sign_eip1559_1core: { ops_per_s: 1500 },
        ethers_sign_eip1559_all_cores: { ops_per_s: 0 },
      }),
    ).toEqual({ ethers_sign_eip1559_1core: 0.333, ethers_sign_eip1559_all_cores: null });
    expect(ceilingRatios('eth-transfer', 300, { anvil_send_raw_transaction: { ops_per_s: 1200 } })).toEqual({
      anvil_send_raw_transaction: 0.25,
    });
  });

  it('is empty for a scenario with no ceiling of its own', () => {
    expect(ceilingRatios('agent-read', 1000, { ethers_sign_eip1559_1core: { ops_per_s: 1 } })).toEqual({});
    expect(Object.keys(SCENARIO_CEILINGS)).toEqual(['sign-intent', 'eth-transfer']);
  });
});

describe('checks after a run', () => {
  it('finds eth-transfer consistent only when every sent transfer was mined and received once', () => {
    expect(transferCheck(100, 100, 100)).toEqual({ consistent: true, discrepancies: 0 });
    // A 201 that was not mined, or a transfer mined without its 201, are both discrepancies.
    expect(transferCheck(100, 98, 98)).toEqual({ consistent: false, discrepancies: 2 });
    expect(transferCheck(100, 103, 100)).toEqual({ consistent: false, discrepancies: 3 });
    expect(transferCheck(100, 100, 99)).toEqual({ consistent: false, discrepancies: 1 });
  });

  it('lets answers left `signed` be mined or not, but no more than they', () => {
    expect(transferCheck(100, 100, 100, 3)).toEqual({ consistent: true, discrepancies: 0 });
    expect(transferCheck(100, 103, 103, 3)).toEqual({ consistent: true, discrepancies: 0 });
    expect(transferCheck(100, 104, 103, 3)).toEqual({ consistent: false, discrepancies: 1 });
    expect(transferCheck(100, 99, 100, 3)).toEqual({ consistent: false, discrepancies: 1 });
  });

  it('adds the discrepancies of an inconsistent check to the failures, at least one', () => {
    expect(checkFailures(undefined)).toBe(0);
    expect(checkFailures({ consistent: true, discrepancies: 0 })).toBe(0);
    expect(checkFailures({ consistent: false, discrepancies: 5 })).toBe(5);
    expect(checkFailures({ consistent: false, discrepancies: 0 })).toBe(1);
    expect(checkFailures({ consistent: false, discrepancies: NaN, error: 'anvil unreachable' })).toBe(1);
  });
});
