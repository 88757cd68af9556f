import {
  DEPENDENCIES_HEALTH_ENTRY,
  DEPENDENCY_HEALTH_PREFIX,
  DependencyHealth,
  HealthRegistry,
  ServingStatus,
} from './health';

describe('DependencyHealth', () => {
  const logs: string[] = [];
  const logger = {
    warn: (_o: object, m: string) => logs.push(m),
    info: (_o: object, m: string) => logs.push(m),
  };

  function setup() {
    const health = new HealthRegistry();
    health.setAll(ServingStatus.SERVING);
    const state = { postgres: true, nats: true };
    const deps = new DependencyHealth(health, logger, 60_000, 200);
    deps.add({ name: 'postgres', required: true, check: async () => state.postgres });
    deps.add({
      name: 'nats',
      required: false,
      // Down means a probe that never answers: the timeout decides.
      check: () => (state.nats ? Promise.resolve(true) : new Promise<boolean>(() => undefined)),
    });
    deps.start();
    return { health, state, deps };
  }

  it('a required dependency down (two probes in a row) turns the server NOT_SERVING and readiness off; it comes back by itself', async () => {
    const { health, state, deps } = setup();
    try {
      await deps.round();
      expect(health.allServing()).toBe(true);
      state.postgres = false;
      await deps.round(); // one failure: a blip
      expect(health.get('')).toBe(ServingStatus.SERVING);
      await deps.round();
      expect(health.get('')).toBe(ServingStatus.NOT_SERVING);
      expect(health.get(`${DEPENDENCY_HEALTH_PREFIX}postgres`)).toBe(ServingStatus.NOT_SERVING);
      expect(health.get(DEPENDENCIES_HEALTH_ENTRY)).toBe(ServingStatus.NOT_SERVING);
      expect(health.allServing()).toBe(false);
      expect(deps.unavailable).toEqual(['postgres']);
      state.postgres = true;
      await deps.round();
      expect(health.get('')).toBe(ServingStatus.SERVING);
      expect(health.allServing()).toBe(true);
      expect(deps.unavailable).toEqual([]);
      expect(logs.filter((l) => l.startsWith('postgres'))).toEqual([
        'postgres is unreachable: NOT_SERVING until it is back',
        'postgres is reachable again',
      ]);
    } finally {
      deps.stop();
    }
  });

  it('an optional dependency that hangs is reported, and the server keeps serving', async () => {
    const { health, state, deps } = setup();
    try {
      state.nats = false;
      await deps.round();
      await deps.round();
      expect(deps.unavailable).toEqual(['nats']);
      expect(health.get(`${DEPENDENCY_HEALTH_PREFIX}nats`)).toBe(ServingStatus.NOT_SERVING);
      expect(health.get(DEPENDENCIES_HEALTH_ENTRY)).toBe(ServingStatus.NOT_SERVING);
      expect(health.get('')).toBe(ServingStatus.SERVING);
      expect(health.allServing()).toBe(true);
    } finally {
      deps.stop();
    }
  });

  it('says nothing once stopped (shutdown owns the status then)', async () => {
    const { health, state, deps } = setup();
    deps.stop();
    health.setAll(ServingStatus.NOT_SERVING);
    state.postgres = true;
    await deps.round();
    expect(health.get('')).toBe(ServingStatus.NOT_SERVING);
  });
});
