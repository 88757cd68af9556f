import { type CpuSnapshot, cpuBetween, perRequestUs } from './cpu';

describe('perRequestUs', () => {
  it('is cores × 1e6 ÷ rps per process, rounded to 0.1 µs', () => {
    const us = perRequestUs({ 'vault-crypto': 0.55, gateway: 0.33 }, 1.9, 218);
    expect(us['vault-crypto']).toBe(2522.9);
    expect(us['gateway']).toBe(1513.8);
    expect(us['machine_total']).toBe(8715.6);
  });

  it('leaves the load generator and unaccounted CPU out of the mesh total, not out of the machine', () => {
    const us = perRequestUs({ gateway: 0.5, postgres: 0.25, 'load-generator': 0.2, other: 0.05 }, 1, 1000);
    expect(us).toEqual({
      gateway: 500,
      postgres: 250,
      'load-generator': 200,
      other: 50,
      mesh_total: 750,
      machine_total: 1000,
    });
  });

  it('says nothing when nothing was served', () => {
    expect(perRequestUs({ gateway: 0.5 }, 1, 0)).toEqual({});
    expect(perRequestUs({ gateway: 0.5 }, 1, Number.NaN)).toEqual({});
  });
});

describe('cpuBetween', () => {
  const snapshot = (atSeconds: number, busy: number, total: number, ticks: Record<string, number>) =>
    ({
      at: BigInt(atSeconds * 1e9),
      machineBusy: busy,
      machineTotal: total,
      byPid: new Map(Object.entries(ticks).map(([pid, t]) => [pid, { label: `p${pid}`, ticks: t }])),
    }) satisfies CpuSnapshot;

  it('adds µs per request from the unrounded cores when the rate is given', () => {
    // clock ticks per second are 100 on Linux; 10 s; p1 used 3.333 s of CPU (0.3333 cores).
    const a = snapshot(0, 0, 0, { '1': 0, '2': 0 });
    const b = snapshot(10, 1000, 2000, { '1': 333.3, '2': 100 });
    const usage = cpuBetween(a, b, 1000)!;
    expect(usage.processes_cores).toEqual({ p1: 0.33, p2: 0.1 });
    expect(usage.us_per_request!['p1']).toBe(333.3);
    expect(usage.us_per_request!['other']).toBe(566.7);
    expect(usage.us_per_request!['mesh_total']).toBe(433.3);
    expect(usage.us_per_request!['machine_total']).toBe(1000);
    expect(cpuBetween(a, b)!.us_per_request).toBeUndefined();
  });

  it('counts only processes seen by both snapshots', () => {
    const usage = cpuBetween(snapshot(0, 0, 0, { '1': 0 }), snapshot(1, 50, 200, { '1': 10, '3': 40 }), 100)!;
    expect(usage.processes_cores).toEqual({ p1: 0.1 });
    expect(usage.other_cores).toBe(0.4);
    expect(usage.machine_busy_fraction).toBe(0.25);
  });
});
