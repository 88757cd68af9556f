import { randomUUID } from 'node:crypto';
import { createLogger } from '@custos/service-kit';
import {
  createTestDatabase,
  testNatsServer,
  waitFor,
  type TestNatsServer,
} from '@custos/service-kit/testing';
import type { JetStreamManager } from '@nats-io/jetstream';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { Registry } from 'prom-client';
import { NatsLink, OutboxRelay, startEventMetrics, writeEvent } from '../src';
import { DDL, SCHEMA, outbox } from './fixtures/schema';

// A stream with a byte limit refuses what does not fit (discard new) for as long as it stays full:
// the relay must keep the outbox's order (nothing after a refused row reaches the stream), back off
// instead of retrying every cycle, log the failure once and count it.
describe('OutboxRelay against a full stream', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: pg.Pool;
  let nats: TestNatsServer;

  beforeAll(async () => {
    database = await createTestDatabase('custos_events_refusals');
    pool = new pg.Pool({ connectionString: database.url, max: 4 });
    pool.on('error', () => undefined);
    await pool.query(DDL);
    nats = await testNatsServer();
    await nats.start();
  });

  afterAll(async () => {
    await nats?.stop();
    await pool?.end();
    await database?.drop();
  });

  /** A 1 MiB stream of its own, filled with `big` messages of 100 KiB and then `small` of 1 KiB until refused. */
  async function fullStream(lines: string[], small: boolean) {
    await pool.query(`DELETE FROM ${SCHEMA}.outbox`);
    const logger = createLogger({
      service: 'refusals-test',
      destination: { write: (l: string) => void lines.push(l) },
    });
    const stream = `FULL_${randomUUID().slice(0, 8)}`;
    const prefix = `full.${stream.toLowerCase()}`;
    const link = new NatsLink(
      [nats.url],
      { stream, subjectPrefix: prefix, maxBytes: 1024 * 1024 },
      logger,
      'r',
    );
    link.start();
    const { js, jsm } = (await waitFor(async () => link.ready(), 20000))!;
    const fill = async (bytes: number) => {
      for (let i = 0; ; i++) {
        const ack = await js
          .publish(`${prefix}.filler`, new Uint8Array(bytes).fill(1), { msgID: `fill-${bytes}-${i}` })
          .catch(() => undefined);
        if (!ack) return;
      }
    };
    await fill(100 * 1024);
    if (small) await fill(1024);
    return { link, logger, stream, prefix, jsm };
  }

  /** The message ids of the stream's messages that are not fillers, in stream order. */
  async function storedIds(jsm: JetStreamManager, stream: string): Promise<string[]> {
    const { state } = await jsm.streams.info(stream);
    const ids: string[] = [];
    for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
      const m = await jsm.streams.getMessage(stream, { seq }).catch(() => undefined);
      const id = m?.header.get('Nats-Msg-Id');
      if (id && !id.startsWith('fill-')) ids.push(id);
    }
    return ids;
  }

  async function makeRoom(jsm: JetStreamManager, stream: string) {
    const { config } = await jsm.streams.info(stream);
    await jsm.streams.update(stream, { ...config, max_bytes: 8 * 1024 * 1024 });
  }

  const outboxRows = async () =>
    (
      await pool.query<{ id: string; published: boolean }>(
        `SELECT id, published_at IS NOT NULL AS published FROM ${SCHEMA}.outbox ORDER BY seq`,
      )
    ).rows;

  it('never stores a small event before the large one the full stream refused, and publishes both in order once there is room', async () => {
    const lines: string[] = [];
    const { link, logger, stream, prefix, jsm } = await fullStream(lines, false);
    const room = 1024 * 1024 - (await jsm.streams.info(stream)).state.bytes;
    const db = drizzle(pool);
    // A does not fit in what is left; B would.
    const a = await db.transaction((tx) =>
      writeEvent(tx, outbox, {
        name: 'policy.updated',
        orgId: 'o',
        data: { big: 'x'.repeat(room + 10_000) },
      }),
    );
    const b = await db.transaction((tx) =>
      writeEvent(tx, outbox, { name: 'policy.updated', orgId: 'o', data: { small: 1 } }),
    );
    const relay = new OutboxRelay({
      pool,
      schema: SCHEMA,
      link,
      subjectPrefix: prefix,
      producer: 'r',
      logger,
    });
    relay.start();
    try {
      await new Promise((r) => setTimeout(r, 2000));
      expect(await storedIds(jsm, stream)).toEqual([]);
      expect(lines.some((l) => l.includes('publishing outbox events failed'))).toBe(true);
      expect(await outboxRows()).toEqual([
        { id: a, published: false },
        { id: b, published: false },
      ]);
      // Room is made (the stream denies deletes: an operator raises the limit): A goes first, then B, each once.
      await makeRoom(jsm, stream);
      await waitFor(async () => (await outboxRows()).every((r) => r.published), 20000);
      expect(await storedIds(jsm, stream)).toEqual([a, b]);
    } finally {
      await relay.stop();
      await link.close();
    }
  });

  it('stops at the first refusal, backs off, logs the failure when it starts and ends, and counts it', async () => {
    const lines: string[] = [];
    const { link, logger, stream, prefix, jsm } = await fullStream(lines, true);
    const registry = new Registry();
    const metrics = startEventMetrics({ registry, logger, pool, schema: SCHEMA, link, lagPollMs: 60_000 });
    const failures = async (reason: string) =>
      (await registry.getSingleMetric('custos_outbox_publish_failures_total')!.get()).values.find(
        (v) => v.labels['reason'] === reason,
      )?.value;
    // Exported from the start, every reason.
    for (const reason of ['stream_full', 'no_responders', 'timeout', 'other'])
      expect(await failures(reason)).toBe(0);
    const db = drizzle(pool);
    const ids: string[] = [];
    for (let i = 0; i < 300; i++)
      ids.push(
        await db.transaction((tx) =>
          writeEvent(tx, outbox, { name: 'policy.updated', orgId: 'o', data: { i, pad: 'p'.repeat(100) } }),
        ),
      );
    const relay = new OutboxRelay({
      pool,
      schema: SCHEMA,
      link,
      subjectPrefix: prefix,
      producer: 'r',
      logger,
    });
    relay.start();
    // A service under write traffic: a nudge per commit, ~200 a second.
    const nudger = setInterval(() => relay.nudge(), 5);
    try {
      await waitFor(async () => ((await failures('stream_full')) ?? 0) > 0, 10000);
      const t0 = Date.now();
      await new Promise((r) => setTimeout(r, 3000));
      const refused = (await failures('stream_full'))!;
      // Backoff 0.5 s, 1 s, 2 s, 4 s: cycles at 0, 0.5, 1.5 and 3.5 s after the first refusal,
      // each refused once (one message at a time): three in 3 s, not one per nudge (a fixed
      // 0.5 s backoff would give seven).
      expect(Date.now() - t0).toBeLessThan(3400);
      expect(refused).toBeGreaterThanOrEqual(2);
      expect(refused).toBeLessThanOrEqual(4);
      expect(lines.filter((l) => l.includes('publishing outbox events failed'))).toHaveLength(1);
      expect(lines.filter((l) => l.includes('"level":"warn"'))).toHaveLength(1);
      // What reached the stream is a prefix of the outbox, and exactly what is marked published.
      const rows = await outboxRows();
      const stored = await storedIds(jsm, stream);
      expect(stored).toEqual(ids.slice(0, stored.length));
      expect(rows.filter((r) => r.published).map((r) => r.id)).toEqual(stored);
      expect(stored.length).toBeLessThan(ids.length);

      await makeRoom(jsm, stream);
      await waitFor(async () => (await outboxRows()).every((r) => r.published), 40000);
      expect(await storedIds(jsm, stream)).toEqual(ids);
      expect(lines.filter((l) => l.includes('publishing outbox events works again'))).toHaveLength(1);
    } finally {
      clearInterval(nudger);
      await relay.stop();
      await metrics.stop();
      await link.close();
    }
  });
  it('goes one message at a time near a full stream, so a pipelined cycle never lets a small event overtake a refused large one', async () => {
    const logger = createLogger({ service: 'refusals-test', level: 'silent' });
    await pool.query(`DELETE FROM ${SCHEMA}.outbox`);
    const stream = `NEAR_${randomUUID().slice(0, 8)}`;
    const prefix = `near.${stream.toLowerCase()}`;
    const link = new NatsLink(
      [nats.url],
      { stream, subjectPrefix: prefix, maxBytes: 1024 * 1024 },
      logger,
      'r',
    );
    link.start();
    const { js, jsm } = (await waitFor(async () => link.ready(), 20000))!;
    const relay = new OutboxRelay({
      pool,
      schema: SCHEMA,
      link,
      subjectPrefix: prefix,
      producer: 'r',
      logger,
      pipelineMarginBytes: 64 * 1024,
      roomReadMs: 0,
    });
    relay.start();
    const db = drizzle(pool);
    const write = (data: Record<string, unknown>) =>
      db.transaction((tx) => writeEvent(tx, outbox, { name: 'policy.updated', orgId: 'o', data }));
    try {
      // Two cycles that publish everything: the relay pipelines from then on while there is room.
      const early: string[] = [];
      for (let i = 0; i < 2; i++) {
        early.push(await write({ early: i }));
        relay.nudge();
        await waitFor(async () => (await outboxRows()).every((r) => r.published), 10000);
      }
      // The stream fills up (other services), leaving less than the margin.
      for (let i = 0; ; i++) {
        const ack = await js
          .publish(`${prefix}.filler`, new Uint8Array(100 * 1024).fill(1), { msgID: `fill-${i}` })
          .catch(() => undefined);
        if (!ack) break;
      }
      const room = 1024 * 1024 - (await jsm.streams.info(stream)).state.bytes;
      // A and B in one cycle: A does not fit, B would.
      const [a, b] = await db.transaction(async (tx) => [
        await writeEvent(tx, outbox, {
          name: 'policy.updated',
          orgId: 'o',
          data: { big: 'x'.repeat(room + 10_000) },
        }),
        await writeEvent(tx, outbox, { name: 'policy.updated', orgId: 'o', data: { small: 1 } }),
      ]);
      relay.nudge();
      await new Promise((r) => setTimeout(r, 2000));
      expect(await storedIds(jsm, stream)).toEqual(early);
      await makeRoom(jsm, stream);
      await waitFor(async () => (await outboxRows()).every((r) => r.published), 20000);
      expect(await storedIds(jsm, stream)).toEqual([...early, a, b]);
    } finally {
      await relay.stop();
      await link.close();
    }
  });
});
