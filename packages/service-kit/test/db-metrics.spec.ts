import type pg from 'pg';
import { Registry } from 'prom-client';
import { createLogger, createPool, registerPoolMetrics } from '../src';
import { testPostgresUrl } from '../src/testing';

const logger = createLogger({ service: 'db-metrics-test', level: 'silent' });

/** The value of `metric{pool="<pool>"}` in the registry's exposition. */
async function sample(registry: Registry, metric: string, pool: string): Promise<number | undefined> {
  const m = await registry.getSingleMetric(metric)?.get();
  return m?.values.find((v) => v.labels['pool'] === pool)?.value;
}

describe('registerPoolMetrics', () => {
  const pools: pg.Pool[] = [];
  afterAll(() => Promise.all(pools.map((p) => p.end())));

  it('reports open, idle, waiting and maximum connections of a real pool as they change', async () => {
    const registry = new Registry();
    const pool = createPool(testPostgresUrl(), 2, logger, 'db-metrics-test');
    const probe = createPool(testPostgresUrl(), 1, logger, 'db-metrics-test-probe');
    pools.push(pool, probe);
    registerPoolMetrics(registry, pool, 'main');
    registerPoolMetrics(registry, probe, 'health');

    expect(await sample(registry, 'custos_pg_pool_max_connections', 'main')).toBe(2);
    expect(await sample(registry, 'custos_pg_pool_max_connections', 'health')).toBe(1);
    expect(await sample(registry, 'custos_pg_pool_connections', 'main')).toBe(0);

    // Both connections checked out, a third checkout queued behind them.
    const a = await pool.connect();
    const b = await pool.connect();
    const third = pool.connect();
    await new Promise((r) => setImmediate(r));
    expect(await sample(registry, 'custos_pg_pool_connections', 'main')).toBe(2);
    expect(await sample(registry, 'custos_pg_pool_idle_connections', 'main')).toBe(0);
    expect(await sample(registry, 'custos_pg_pool_waiting_requests', 'main')).toBe(1);

    a.release();
    const c = await third;
    expect(await sample(registry, 'custos_pg_pool_waiting_requests', 'main')).toBe(0);
    b.release();
    c.release();
    expect(await sample(registry, 'custos_pg_pool_connections', 'main')).toBe(2);
    expect(await sample(registry, 'custos_pg_pool_idle_connections', 'main')).toBe(2);
    // The other pool is reported apart.
    expect(await sample(registry, 'custos_pg_pool_connections', 'health')).toBe(0);

    const text = await registry.metrics();
    expect(text).toContain('custos_pg_pool_waiting_requests{pool="main"} 0');
  });
});
