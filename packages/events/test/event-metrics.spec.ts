import { randomUUID } from 'node:crypto';
import { createLogger } from '@custos/service-kit';
import {
  createTestDatabase,
  testNatsServer,
  waitFor,
  type TestNatsServer,
} from '@custos/service-kit/testing';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { Registry } from 'prom-client';
import { IdempotentConsumer, NatsLink, startEventMetrics, trackConsumer, untrackConsumer } from '../src';
import { DDL, SCHEMA, inbox } from './fixtures/schema';

// The event plumbing's metrics against real Postgres and JetStream: the outbox backlog a relay has
// not published, and a consumer's lag, applied events, failures and delay.
const logger = createLogger({ service: 'event-metrics-test', level: 'silent' });

/** The value of `name` (with `labels`) as the registry would expose it now. */
async function value(registry: Registry, name: string, labels: Record<string, string> = {}) {
  const m = await registry.getSingleMetric(name)?.get();
  return m?.values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value;
}

describe('startEventMetrics', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: pg.Pool;
  let nats: TestNatsServer;
  let link: NatsLink;
  const stream = `MET_${randomUUID().slice(0, 8)}`;
  const prefix = `metrics.${stream.toLowerCase()}`;

  beforeAll(async () => {
    database = await createTestDatabase('custos_event_metrics');
    pool = new pg.Pool({ connectionString: database.url, max: 4 });
    pool.on('error', () => undefined);
    await pool.query(DDL);
    nats = await testNatsServer();
    await nats.start();
    link = new NatsLink([nats.url], { stream, subjectPrefix: prefix }, logger, 'metrics-test');
    link.start();
    await waitFor(async () => (await link.ready()) !== undefined, 20000);
  });

  afterAll(async () => {
    await link?.close();
    await nats?.stop();
    await pool?.end();
    await database?.drop();
  });

  it('reports the unpublished outbox rows and the age of the oldest, re-reading after the cache time', async () => {
    const registry = new Registry();
    const metrics = startEventMetrics({ registry, logger, pool, schema: SCHEMA, link, outboxCacheMs: 0 });
    try {
      expect(await value(registry, 'custos_outbox_pending_events')).toBe(0);
      expect(await value(registry, 'custos_outbox_oldest_pending_age_seconds')).toBe(0);
      await pool.query(
        `INSERT INTO ${SCHEMA}.outbox (id, name, payload, created_at, published_at) VALUES
           ($1, 'policy.updated', '{}', now() - interval '90 seconds', NULL),
           ($2, 'policy.updated', '{}', now() - interval '10 seconds', NULL),
           ($3, 'policy.updated', '{}', now() - interval '1 hour', now())`,
        [randomUUID(), randomUUID(), randomUUID()],
      );
      expect(await value(registry, 'custos_outbox_pending_events')).toBe(2);
      const age = (await value(registry, 'custos_outbox_oldest_pending_age_seconds'))!;
      // The published row, older still, does not count.
      expect(age).toBeGreaterThanOrEqual(90);
      expect(age).toBeLessThan(120);
      await pool.query(`UPDATE ${SCHEMA}.outbox SET published_at = now()`);
      expect(await value(registry, 'custos_outbox_pending_events')).toBe(0);
      // Once per registry: a second start hands back the first.
      expect(startEventMetrics({ registry, logger, pool, schema: SCHEMA, link })).toBe(metrics);
    } finally {
      await metrics.stop();
    }
  });

  it('keeps the last reading while the outbox query outlasts its timeout (a saturated pool)', async () => {
    const registry = new Registry();
    const tiny = new pg.Pool({ connectionString: database.url, max: 1 });
    const metrics = startEventMetrics({
      registry,
      logger,
      pool: tiny,
      schema: SCHEMA,
      link,
      outboxCacheMs: 0,
      outboxTimeoutMs: 200,
    });
    const held = await tiny.connect();
    try {
      const started = Date.now();
      expect(await value(registry, 'custos_outbox_pending_events')).toBe(0);
      expect(Date.now() - started).toBeLessThan(2000);
    } finally {
      held.release();
      await metrics.stop();
      await tiny.end();
    }
  });

  it('reports a consumer’s JetStream lag, the events it applied and failed, and their delay', async () => {
    const registry = new Registry();
    const metrics = startEventMetrics({ registry, logger, pool, schema: SCHEMA, link, lagPollMs: 60_000 });
    const durable = `lag_${randomUUID().slice(0, 8)}`;
    const { js } = (await link.ready())!;
    // Published before the consumer starts: it finds them pending. One event is 30 s old.
    const failing = randomUUID();
    const ids = [randomUUID(), randomUUID(), failing];
    for (const [i, id] of ids.entries()) {
      const createdAt = new Date(Date.now() - (i === 0 ? 30_000 : 0)).toISOString();
      await js.publish(
        `${prefix}.policy.updated`,
        JSON.stringify({ id, type: 'policy.updated', created_at: createdAt, org_id: null, data: {} }),
        { msgID: id },
      );
    }
    let gate: (() => void) | undefined;
    const gated = new Promise<void>((r) => (gate = r));
    const c = new IdempotentConsumer({
      link,
      stream,
      durable,
      filterSubject: `${prefix}.policy.>`,
      db: drizzle(pool),
      inbox,
      logger,
      retryDelayMs: 60_000,
      handler: async (event) => {
        await gated;
        if (event.id === failing) throw new Error('refused');
      },
    });
    c.start();
    try {
      // The consumer holds the first message in its handler; the others wait in JetStream or in hand.
      await waitFor(async () => {
        await metrics.pollLag();
        const pending =
          (await value(registry, 'custos_nats_consumer_pending_messages', { consumer: durable })) ?? 0;
        const acks =
          (await value(registry, 'custos_nats_consumer_ack_pending_messages', { consumer: durable })) ?? 0;
        return pending + acks === 3 && acks >= 1;
      });
      gate!();
      await waitFor(
        async () =>
          (await value(registry, 'custos_event_consumer_applied_total', { consumer: durable })) === 2,
      );
      await waitFor(
        async () =>
          (await value(registry, 'custos_event_consumer_failures_total', { consumer: durable })) === 1,
      );
      const delay = await registry.getSingleMetric('custos_event_consumer_delay_seconds')!.get();
      const mine = delay.values.filter((v) => v.labels['consumer'] === durable);
      expect(mine.find((v) => v.metricName?.endsWith('_count'))?.value).toBe(2);
      // The 30-second-old event is in the buckets above 10 s, not below.
      expect(mine.find((v) => v.metricName?.endsWith('_bucket') && v.labels['le'] === 10)?.value).toBe(1);
      expect(mine.find((v) => v.metricName?.endsWith('_bucket') && v.labels['le'] === 60)?.value).toBe(2);
      // The failed event waits for its redelivery, unacknowledged.
      await metrics.pollLag();
      expect(await value(registry, 'custos_nats_consumer_pending_messages', { consumer: durable })).toBe(0);
      expect(await value(registry, 'custos_nats_consumer_ack_pending_messages', { consumer: durable })).toBe(
        1,
      );
    } finally {
      await c.stop();
      await metrics.stop();
    }
  });
  it('counts the events a consumer drops for good by reason, each exported as zero from its start', async () => {
    const registry = new Registry();
    const metrics = startEventMetrics({ registry, logger, pool, schema: SCHEMA, link, lagPollMs: 60_000 });
    const durable = `drop_${randomUUID().slice(0, 8)}`;
    const dropped = async (reason: string) =>
      value(registry, 'custos_event_consumer_dropped_total', { consumer: durable, reason });
    const applied: string[] = [];
    const c = new IdempotentConsumer({
      link,
      stream,
      durable,
      filterSubject: `${prefix}.policy.>`,
      db: drizzle(pool),
      inbox,
      logger,
      handler: async (event) => {
        applied.push(event.id);
      },
    });
    c.start();
    try {
      // Before any event and before the first lag poll.
      for (const reason of ['malformed', 'type_mismatch', 'id_mismatch'])
        expect(await dropped(reason)).toBe(0);
      const { js } = (await link.ready())!;
      const envelope = (id: string, type: string) =>
        JSON.stringify({ id, type, created_at: new Date().toISOString(), org_id: null, data: {} });
      await js.publish(`${prefix}.policy.updated`, 'not json', { msgID: randomUUID() });
      const wrongType = randomUUID();
      await js.publish(`${prefix}.policy.updated`, envelope(wrongType, 'policy.created'), {
        msgID: wrongType,
      });
      await js.publish(`${prefix}.policy.updated`, envelope(randomUUID(), 'policy.updated'), {
        msgID: randomUUID(),
      });
      const good = randomUUID();
      await js.publish(`${prefix}.policy.updated`, envelope(good, 'policy.updated'), { msgID: good });
      await waitFor(async () => applied.includes(good));
      expect(await dropped('malformed')).toBe(1);
      expect(await dropped('type_mismatch')).toBe(1);
      expect(await dropped('id_mismatch')).toBe(1);
    } finally {
      await c.stop();
      await metrics.stop();
    }
  });
  it('removes a consumer’s lag series when its info cannot be read, and counts the failure', async () => {
    const registry = new Registry();
    const metrics = startEventMetrics({ registry, logger, pool, schema: SCHEMA, link, lagPollMs: 60_000 });
    const durable = `info_${randomUUID().slice(0, 8)}`;
    const { jsm } = (await link.ready())!;
    await jsm.consumers.add(stream, { durable_name: durable, filter_subject: `${prefix}.policy.>` });
    trackConsumer(link, stream, durable);
    const lag = () => value(registry, 'custos_nats_consumer_pending_messages', { consumer: durable });
    const infoFailures = () =>
      value(registry, 'custos_nats_consumer_info_failures_total', { consumer: durable });
    try {
      await metrics.pollLag();
      expect(await lag()).toBeGreaterThanOrEqual(0);
      expect(await infoFailures()).toBe(0);
      await jsm.consumers.delete(stream, durable);
      await metrics.pollLag();
      // No stale reading: the series is gone, the failed read counted.
      expect(await lag()).toBeUndefined();
      expect(
        await value(registry, 'custos_nats_consumer_ack_pending_messages', { consumer: durable }),
      ).toBeUndefined();
      expect(await infoFailures()).toBe(1);
    } finally {
      untrackConsumer(link, stream, durable);
      await metrics.stop();
    }
  });
});
