import { Gauge, type Registry } from 'prom-client';
import type pg from 'pg';

/** The pools of one registry, by their `pool` label; the gauges read them at scrape time. */
const poolsOf = new WeakMap<Registry, Map<string, pg.Pool>>();

/** A pool's configured maximum (pg's default is 10 when none was given). */
function maxOf(pool: pg.Pool): number {
  return (pool as pg.Pool & { options?: { max?: number } }).options?.max ?? 10;
}

/**
 * Exports the saturation of `pool` under the label `pool="<name>"`: open, idle and maximum
 * connections and the checkouts waiting for one. The gauges read node-postgres' counters when
 * scraped (no query, no timer). Registering another pool under the same name replaces the first.
 */
export function registerPoolMetrics(registry: Registry, pool: pg.Pool, name: string): void {
  let pools = poolsOf.get(registry);
  if (!pools) {
    const all = new Map<string, pg.Pool>();
    pools = all;
    poolsOf.set(registry, all);
    const gauge = (metric: string, help: string, read: (p: pg.Pool) => number) =>
      new Gauge({
        name: metric,
        help,
        labelNames: ['pool'],
        registers: [registry],
        collect() {
          this.reset();
          for (const [label, p] of all) this.set({ pool: label }, read(p));
        },
      });
    gauge(
      'custos_pg_pool_connections',
      'Open Postgres connections of the pool (idle and in use).',
      (p) => p.totalCount,
    );
    gauge(
      'custos_pg_pool_idle_connections',
      'Open Postgres connections of the pool not in use.',
      (p) => p.idleCount,
    );
    gauge(
      'custos_pg_pool_waiting_requests',
      'Checkouts waiting for a Postgres connection because the pool is at its maximum.',
      (p) => p.waitingCount,
    );
    gauge('custos_pg_pool_max_connections', 'The maximum number of connections of the pool.', maxOf);
  }
  pools.set(name, pool);
}
