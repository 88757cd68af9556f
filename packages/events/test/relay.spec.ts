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
import {
  IdempotentConsumer,
  NatsLink,
  OutboxRelay,
  writeEvent,
  type ConsumedEvent,
  type EventEnvelope,
} from '../src';
import { DDL, SCHEMA, inbox, outbox } from './fixtures/schema';

const logger = createLogger({ service: 'relay-test', level: 'silent' });

describe('OutboxRelay', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: pg.Pool;
  let nats: TestNatsServer;
  let link: NatsLink;
  const stream = `REL_${randomUUID().slice(0, 8)}`;
  const prefix = `rel.${stream.toLowerCase()}`;
  const stoppers: Array<() => Promise<void>> = [];

  beforeAll(async () => {
    database = await createTestDatabase('custos_events_relay');
    pool = new pg.Pool({ connectionString: database.url, max: 4 });
    pool.on('error', () => undefined);
    await pool.query(DDL);
    nats = await testNatsServer();
    await nats.start();
    link = new NatsLink([nats.url], { stream, subjectPrefix: prefix }, logger, 'relay-test');
    link.start();
    await waitFor(async () => (await link.ready()) !== undefined, 20000);
  });

  afterEach(async () => {
    for (const stop of stoppers.splice(0).reverse()) await stop();
  });

  afterAll(async () => {
    await link?.close();
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

  it('publishes when nudged, without waiting for its poll, and every envelope as it was written', async () => {
    // A poll far beyond the test's patience: only the nudge can make it publish in time.
    const relay = new OutboxRelay({
      pool,
      schema: SCHEMA,
      link,
      subjectPrefix: prefix,
      producer: 'relay-test',
      logger,
      pollMs: 10 * 60 * 1000,
    });
    relay.start();
    stoppers.push(() => relay.stop());
    await waitFor(async () => (await unpublished()) === 0, 20000);

    const handled: EventEnvelope[] = [];
    const consumer = new IdempotentConsumer({
      link,
      stream,
      durable: 'relay-test',
      filterSubject: `${prefix}.>`,
      db: drizzle(pool),
      inbox,
      logger,
      handler: async (event) => {
        handled.push(event);
      },
    });
    consumer.start();
    stoppers.push(() => consumer.stop());

    const data = [
      { policy_id: 'p1', nested: { b: [1, 2.5, null, true], a: 'x' } },
      { text: 'quotes " and \\ and é 🙂 and \n newline', empty: {}, list: [] },
      { n: 0 },
    ];
    const ids: string[] = [];
    for (const [i, d] of data.entries()) {
      ids.push(
        await drizzle(pool).transaction((tx) =>
          writeEvent(tx, outbox, { name: 'policy.updated', orgId: i === 2 ? null : 'org-r', data: d }),
        ),
      );
    }
    relay.nudge();
    await waitFor(async () => handled.length === data.length, 20000);
    expect(await unpublished()).toBe(0);
    expect(handled.map((e) => e.id)).toEqual(ids);
    expect(handled.map((e) => e.data)).toEqual(data);
    expect(handled.map((e) => e.org_id)).toEqual(['org-r', 'org-r', null]);
    for (const e of handled) {
      expect(e.type).toBe('policy.updated');
      expect(new Date(e.created_at).toISOString()).toBe(e.created_at);
    }
  });
  it('sends the audit records of a cycle several to a message; a consumer applies each once, in order', async () => {
    const relay = new OutboxRelay({
      pool,
      schema: SCHEMA,
      link,
      subjectPrefix: prefix,
      producer: 'relay-test',
      logger,
      pollMs: 10 * 60 * 1000,
      // Small enough that the first 50 records need several messages.
      maxMessageBytes: 4096,
    });
    relay.start();
    stoppers.push(() => relay.stop());
    await waitFor(async () => (await unpublished()) === 0, 20000);
    const { jsm } = (await link.ready())!;
    const stored = async () => (await jsm.streams.info(stream)).state.messages;

    const db = drizzle(pool);
    const orgs = ['org-a', 'org-b'];
    const write = (n: number) =>
      db.transaction(async (tx) => {
        const ids: string[] = [];
        for (let i = 0; i < n; i++) {
          const org = orgs[i % 2]!;
          ids.push(
            await writeEvent(tx, outbox, {
              name: 'audit.recorded',
              orgId: org,
              data: { org_id: org, action: 'secret.read', resource_id: `r${i}`, note: 'x'.repeat(40) },
            }),
          );
          // Other events of the same cycle still go out one to a message.
          if (i === 10) await writeEvent(tx, outbox, { name: 'policy.updated', orgId: org, data: { i } });
        }
        return ids;
      });

    const before = await stored();
    const first = await write(50);
    relay.nudge();
    await waitFor(async () => (await unpublished()) === 0, 20000);
    const firstMessages = (await stored()) - before;
    // 51 rows, far fewer messages: a few batches of records, and the policy event alone.
    expect(firstMessages).toBeGreaterThan(2);
    expect(firstMessages).toBeLessThan(20);

    const applied: ConsumedEvent[] = [];
    const consumer = new IdempotentConsumer({
      link,
      stream,
      durable: 'relay-batches',
      filterSubject: `${prefix}.audit.recorded.>`,
      db,
      pool,
      inbox,
      logger,
      batchHandler: async (events) => {
        applied.push(...events);
      },
    });
    consumer.start();
    stoppers.push(() => consumer.stop());
    await waitFor(async () => applied.length === first.length, 20000);
    expect(applied.map((e) => e.event.id)).toEqual(first);
    expect(applied[0]!.delivery).toEqual({
      subject: `${prefix}.audit.recorded.relay-test`,
      producer: 'relay-test',
    });
    expect(applied[3]!.event).toMatchObject({
      type: 'audit.recorded',
      org_id: 'org-b',
      data: { org_id: 'org-b', action: 'secret.read', resource_id: 'r3' },
    });

    // A relay that published but could not mark (it died, or Postgres failed) publishes the rows
    // again, cut otherwise since more rows came meanwhile: only the new record is applied.
    await pool.query(`UPDATE ${SCHEMA}.outbox SET published_at = NULL WHERE id = ANY($1::uuid[])`, [first]);
    const [late] = await write(1);
    relay.nudge();
    await waitFor(async () => (await unpublished()) === 0, 20000);
    await waitFor(async () => applied.length === first.length + 1, 20000);
    await new Promise((r) => setTimeout(r, 500));
    expect(applied.map((e) => e.event.id)).toEqual([...first, late]);

    // The same rows cut the same way again: JetStream drops the copies (same message ids).
    const sizeBefore = await stored();
    await pool.query(`UPDATE ${SCHEMA}.outbox SET published_at = NULL WHERE id = ANY($1::uuid[])`, [
      [...first, late],
    ]);
    relay.nudge();
    await waitFor(async () => (await unpublished()) === 0, 20000);
    expect(await stored()).toBe(sizeBefore);
    expect(applied).toHaveLength(first.length + 1);
  });

  it('prunes published rows past their retention, keeps unpublished and recent ones, and every inbox row', async () => {
    await pool.query(`DELETE FROM ${SCHEMA}.outbox`);
    await pool.query(`DELETE FROM ${SCHEMA}.inbox`);
    const row = (publishedAgo: string | null) =>
      pool.query(
        `INSERT INTO ${SCHEMA}.outbox (id, name, org_id, payload, published_at)
         VALUES ($1, 'vault.created', NULL, '{}'::jsonb, ${publishedAgo === null ? 'NULL' : `now() - interval '${publishedAgo}'`})`,
        [randomUUID()],
      );
    await row('2 days'); // published long ago: goes
    await row('2 days');
    await row('1 minute'); // published recently: stays
    await pool.query(
      `INSERT INTO ${SCHEMA}.inbox (consumer, event_id, processed_at) VALUES
       ('c', $1, now() - interval '8 days'), ('c', $2, now() - interval '1 hour')`,
      [randomUUID(), randomUUID()],
    );
    // Not started: its one cycle below (publishBatch) makes it the leader that prunes.
    const relay = new OutboxRelay({
      pool,
      schema: SCHEMA,
      link,
      subjectPrefix: prefix,
      producer: 'relay-test',
      logger,
      pollMs: 10 * 60 * 1000,
    });
    stoppers.push(() => relay.stop());
    // An unpublished row, written after: the cycle publishes it, and it is recent, so it stays.
    await row(null);
    await relay.publishBatch();
    expect(await relay.prune()).toBe(2);
    const left = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${SCHEMA}.outbox`);
    expect(left.rows[0]!.n).toBe(2);
    const inboxLeft = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${SCHEMA}.inbox`);
    expect(inboxLeft.rows[0]!.n).toBe(2);
  });
});
