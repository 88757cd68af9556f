import { randomUUID } from 'node:crypto';
import { createLogger } from '@custos/service-kit';
import {
  createTestDatabase,
  testNatsServer,
  waitFor,
  type TestNatsServer,
} from '@custos/service-kit/testing';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { NatsLink, OutboxRelay, writeEvent } from '../src';
import { DDL, SCHEMA, outbox } from './fixtures/schema';

// The relay goes one message at a time only while it must (at start, after a refusal, near a full
// stream): in normal operation its cycles are pipelined, and that is what keeps its throughput.
describe('OutboxRelay pipelining and leadership', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: pg.Pool;
  let nats: TestNatsServer;

  beforeAll(async () => {
    database = await createTestDatabase('custos_events_pipeline');
    pool = new pg.Pool({ connectionString: database.url, max: 6 });
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

  const unpublished = async () =>
    (
      await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${SCHEMA}.outbox WHERE published_at IS NULL`,
      )
    ).rows[0]!.n;

  /** A link to a stream of its own (1 MiB, discard new, when `maxBytes`). */
  async function streamOf(maxBytes?: number) {
    await pool.query(`DELETE FROM ${SCHEMA}.outbox`);
    const lines: string[] = [];
    const logger = createLogger({
      service: 'pipeline-test',
      destination: { write: (l: string) => void lines.push(l) },
    });
    const stream = `PIPE_${randomUUID().slice(0, 8)}`;
    const prefix = `pipe.${stream.toLowerCase()}`;
    const link = new NatsLink(
      [nats.url],
      { stream, subjectPrefix: prefix, ...(maxBytes ? { maxBytes } : {}) },
      logger,
      'r',
    );
    link.start();
    const { js, jsm } = (await waitFor(async () => link.ready(), 20000))!;
    return { link, logger, lines, stream, prefix, js, jsm };
  }

  /** Counts the relay's js.publish calls in flight (not the test's fillers) and their peak. */
  function countInFlight(js: JetStreamClient, prefix: string) {
    const c = { now: 0, peak: 0, calls: 0 };
    const publish = js.publish.bind(js);
    js.publish = async (subject, ...rest) => {
      if (subject.endsWith('.filler') || !subject.startsWith(prefix)) return publish(subject, ...rest);
      c.calls++;
      c.now++;
      c.peak = Math.max(c.peak, c.now);
      try {
        return await publish(subject, ...rest);
      } finally {
        c.now--;
      }
    };
    return c;
  }

  const writeMany = (n: number, data: (i: number) => Record<string, unknown>) =>
    drizzle(pool).transaction(async (tx) => {
      const ids: string[] = [];
      for (let i = 0; i < n; i++)
        ids.push(await writeEvent(tx, outbox, { name: 'policy.updated', orgId: 'o', data: data(i) }));
      return ids;
    });

  async function cycleOf(relay: OutboxRelay, flight: { peak: number; calls: number }, n: number) {
    flight.peak = 0;
    flight.calls = 0;
    await writeMany(n, (i) => ({ i }));
    relay.nudge();
    await waitFor(async () => (await unpublished()) === 0, 20000, 20);
    return { peak: flight.peak, calls: flight.calls };
  }

  it('pipelines a cycle after one that published everything, and again after recovering from a refusal', async () => {
    const { link, logger, prefix, js, jsm, stream } = await streamOf(1024 * 1024);
    const flight = countInFlight(js, prefix);
    const relay = new OutboxRelay({
      pool,
      schema: SCHEMA,
      link,
      subjectPrefix: prefix,
      producer: 'r',
      logger,
      pipelineMarginBytes: 64 * 1024,
      roomReadMs: 0,
      backoffMs: 100,
    });
    relay.start();
    try {
      // The first cycle after start goes one at a time; the next is pipelined.
      expect((await cycleOf(relay, flight, 20)).peak).toBe(1);
      const normal = await cycleOf(relay, flight, 20);
      expect(normal.calls).toBe(20);
      expect(normal.peak).toBeGreaterThan(1);

      // The stream fills up; a large row is refused, then room is made and it goes out.
      for (let i = 0; ; i++) {
        const ack = await js
          .publish(`${prefix}.filler`, new Uint8Array(100 * 1024).fill(1), { msgID: `fill-${i}` })
          .catch(() => undefined);
        if (!ack) break;
      }
      const room = 1024 * 1024 - (await jsm.streams.info(stream)).state.bytes;
      await writeMany(1, () => ({ big: 'x'.repeat(room + 10_000) }));
      flight.calls = 0;
      relay.nudge();
      await waitFor(async () => flight.calls >= 2, 10000);
      expect(await unpublished()).toBe(1);
      const { config } = await jsm.streams.info(stream);
      await jsm.streams.update(stream, { ...config, max_bytes: 64 * 1024 * 1024 });
      await waitFor(async () => (await unpublished()) === 0, 20000);
      // Recovered: the cycle that published everything was one at a time, the next is pipelined.
      const after = await cycleOf(relay, flight, 20);
      expect(after.calls).toBe(20);
      expect(after.peak).toBeGreaterThan(1);
    } finally {
      await relay.stop();
      await link.close();
    }
  });

  it('reads the stream info again only after roomReadMs when the read fails, not every cycle', async () => {
    const { link, logger, prefix, js, jsm } = await streamOf(1024 * 1024);
    const flight = countInFlight(js, prefix);
    const relay = new OutboxRelay({
      pool,
      schema: SCHEMA,
      link,
      subjectPrefix: prefix,
      producer: 'r',
      logger,
      pipelineMarginBytes: 64 * 1024,
      roomReadMs: 1000,
    });
    relay.start();
    try {
      await cycleOf(relay, flight, 5);
      await cycleOf(relay, flight, 5);
      // The stream's info cannot be read from now on (a JetStream API outage, a timeout).
      let reads = 0;
      const streams = jsm.streams as { info: JetStreamManager['streams']['info'] };
      streams.info = () => {
        reads++;
        return Promise.reject(new Error('stream info unavailable'));
      };
      const t0 = Date.now();
      let cycles = 0;
      while (Date.now() - t0 < 3000) {
        const c = await cycleOf(relay, flight, 5);
        cycles++;
        // Rows still go out; the cycles that follow a failed read go one message at a time.
        expect(c.calls).toBe(5);
      }
      expect(cycles).toBeGreaterThan(10);
      // At most one read per roomReadMs (the cached room went stale at most once before t0).
      expect(reads).toBeGreaterThanOrEqual(2);
      expect(reads).toBeLessThanOrEqual(4);
    } finally {
      await relay.stop();
      await link.close();
    }
  });

  it('a replica that lost the lock during a refusal keeps polling (no backoff from that failure) and takes over at once, without a misleading log', async () => {
    const { link, logger, lines, prefix, js, jsm, stream } = await streamOf(1024 * 1024);
    const flight = countInFlight(js, prefix);
    // The stream is full: the relay's one row is refused, a failure is in progress.
    for (let i = 0; ; i++) {
      const ack = await js
        .publish(`${prefix}.filler`, new Uint8Array(100 * 1024).fill(1), { msgID: `fill-${i}` })
        .catch(() => undefined);
      if (!ack) break;
    }
    const room = 1024 * 1024 - (await jsm.streams.info(stream)).state.bytes;
    await writeMany(1, () => ({ big: 'x'.repeat(room + 10_000) }));
    const relay = new OutboxRelay({
      pool,
      schema: SCHEMA,
      link,
      subjectPrefix: prefix,
      producer: 'r',
      logger,
    });
    const other = await pool.connect();
    let released = false;
    relay.start();
    try {
      await waitFor(async () => lines.some((l) => l.includes('publishing outbox events failed')), 10000);
      // It loses the lock (Postgres ends its connection) and another replica takes it.
      await pool.query(
        `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted
           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      );
      await waitFor(
        async () =>
          (
            await other.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [
              `custos.outbox.${SCHEMA}`,
            ])
          ).rows[0]!.ok,
        5000,
        20,
      );
      // Long enough for a backoff from the old failure to reach 8 s (0.5 + 1 + 2 + 4 …).
      await new Promise((r) => setTimeout(r, 8000));
      flight.calls = 0;
      await writeMany(3, (i) => ({ i }));
      relay.nudge();
      await new Promise((r) => setTimeout(r, 500));
      expect(flight.calls).toBe(0);
      // The other replica goes away after making room: this one takes over within a poll.
      const { config } = await jsm.streams.info(stream);
      await jsm.streams.update(stream, { ...config, max_bytes: 64 * 1024 * 1024 });
      other.release(true);
      released = true;
      const t0 = Date.now();
      await waitFor(async () => (await unpublished()) === 0, 20000, 50);
      expect(Date.now() - t0).toBeLessThan(1500);
      // It did not see the failure end: no "works again" line (the leader at the time would log it).
      expect(lines.filter((l) => l.includes('works again'))).toEqual([]);
    } finally {
      if (!released) other.release(true);
      await relay.stop();
      await link.close();
    }
  }, 40000);

  it('survives its leader connection breaking between cycles, and leads again', async () => {
    const { link, logger, lines, prefix, js } = await streamOf();
    const flight = countInFlight(js, prefix);
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
      await cycleOf(relay, flight, 3);
      // Postgres ends the leader's (idle, checked-out) connection: an 'error' event on its client.
      const killed = await pool.query(
        `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted
           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      );
      expect(killed.rowCount).toBe(1);
      await new Promise((r) => setTimeout(r, 300));
      expect((await cycleOf(relay, flight, 3)).calls).toBe(3);
      expect(lines.filter((l) => l.includes('outbox relay cycle failed'))).toHaveLength(1);
    } finally {
      await relay.stop();
      await link.close();
    }
  });
});
