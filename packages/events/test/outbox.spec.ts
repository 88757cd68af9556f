import { spawn } from 'node:child_process';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { createLogger } from '@custos/service-kit';
import {
  createTestDatabase,
  testNatsServer,
  waitFor,
  type TestNatsServer,
} from '@custos/service-kit/testing';
import { AckPolicy, DeliverPolicy } from '@nats-io/jetstream';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import {
  IdempotentConsumer,
  NatsLink,
  OutboxRelay,
  writeEvent,
  type EventDelivery,
  type EventEnvelope,
} from '../src';
import { DDL, SCHEMA, inbox, outbox } from './fixtures/schema';

const logger = createLogger({ service: 'events-test', level: 'silent' });

describe('outbox → JetStream → idempotent consumer', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: pg.Pool;
  let nats: TestNatsServer;
  const stoppers: Array<() => Promise<void>> = [];
  const stream = `EVT_${randomUUID().slice(0, 8)}`;
  const prefix = `test.${stream.toLowerCase()}`;

  beforeAll(async () => {
    database = await createTestDatabase('custos_events');
    pool = new pg.Pool({ connectionString: database.url, max: 8 });
    // An idle client the teardown's DROP DATABASE … (FORCE) terminates must not fail the file.
    pool.on('error', () => undefined);
    await pool.query(DDL);
    nats = await testNatsServer();
  });

  afterEach(async () => {
    for (const stop of stoppers.splice(0).reverse()) await stop();
  });

  afterAll(async () => {
    await nats.stop();
    await pool.end();
    await database.drop();
  });

  const db = () => drizzle(pool);

  function startPipeline(
    durable: string,
    accept?: (e: EventEnvelope) => boolean,
    on: { stream: string; prefix: string; duplicateWindowMs?: number } = { stream, prefix },
  ) {
    const handled: EventEnvelope[] = [];
    const deliveries: EventDelivery[] = [];
    const link = new NatsLink(
      [nats.url],
      {
        stream: on.stream,
        subjectPrefix: on.prefix,
        ...(on.duplicateWindowMs ? { duplicateWindowMs: on.duplicateWindowMs } : {}),
      },
      logger,
      'test',
    );
    link.start();
    const relay = new OutboxRelay({
      pool,
      schema: SCHEMA,
      link,
      subjectPrefix: on.prefix,
      producer: 'events-test',
      logger,
      pollMs: 50,
    });
    const consumer = new IdempotentConsumer({
      link,
      stream: on.stream,
      durable,
      filterSubject: `${on.prefix}.>`,
      db: db(),
      inbox,
      logger,
      handler: async (event, _tx, delivery) => {
        handled.push(event);
        deliveries.push(delivery);
      },
      ...(accept ? { accept } : {}),
    });
    relay.start();
    consumer.start();
    stoppers.push(
      () => link.close(),
      () => relay.stop(),
      () => consumer.stop(),
    );
    return { handled, deliveries, relay, link };
  }

  const unpublished = async (id: string) =>
    (await pool.query(`SELECT published_at FROM ${SCHEMA}.outbox WHERE id = $1`, [id])).rows[0]
      ?.published_at === null;

  it('keeps an event committed while NATS is down and delivers it exactly once when NATS starts', async () => {
    const { handled } = startPipeline('down-then-up');
    const id = await db().transaction((tx) =>
      writeEvent(tx, outbox, { name: 'policy.created', orgId: 'org-1', data: { policy_id: 'p1' } }),
    );
    await new Promise((r) => setTimeout(r, 1000));
    expect(await unpublished(id)).toBe(true);
    expect(handled).toHaveLength(0);

    await nats.start();
    await waitFor(async () => handled.length > 0, 30000);
    await waitFor(async () => !(await unpublished(id)));
    await new Promise((r) => setTimeout(r, 1000));
    expect(handled.map((e) => e.id)).toEqual([id]);
    expect(handled[0]).toMatchObject({ type: 'policy.created', org_id: 'org-1', data: { policy_id: 'p1' } });
    const rows = await pool.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.inbox WHERE event_id = $1`, [id]);
    expect(rows.rows[0].n).toBe(1);
  });

  it('emits nothing for a rolled-back transaction', async () => {
    if (!(await isUp(nats))) await nats.start();
    const { handled } = startPipeline('rollback');
    let rolledBack = '';
    await expect(
      db().transaction(async (tx) => {
        rolledBack = await writeEvent(tx, outbox, { name: 'policy.deleted', orgId: 'org-1', data: {} });
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    const sentinel = await db().transaction((tx) =>
      writeEvent(tx, outbox, { name: 'policy.updated', orgId: 'org-1', data: {} }),
    );
    await waitFor(async () => handled.some((e) => e.id === sentinel), 20000);
    expect(rolledBack).not.toBe('');
    expect(handled.some((e) => e.id === rolledBack)).toBe(false);
    const r = await pool.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.outbox WHERE id = $1`, [rolledBack]);
    expect(r.rows[0].n).toBe(0);
  });

  it('does not handle twice when a relay is killed after publishing but before marking', async () => {
    if (!(await isUp(nats))) await nats.start();
    const { handled } = startPipeline('killed-relay');
    // Stop the in-process relay of this pipeline so only the child relay publishes at first.
    const inProcess = stoppers.splice(1, 1)[0]!;
    await inProcess();
    const id = await db().transaction((tx) =>
      writeEvent(tx, outbox, { name: 'approval.created', orgId: 'org-2', data: { n: 1 } }),
    );
    // Hold the row lock so the child relay publishes, then blocks on marking the row.
    const locker = await pool.connect();
    await locker.query('BEGIN');
    await locker.query(`SELECT id FROM ${SCHEMA}.outbox WHERE id = $1 FOR UPDATE`, [id]);
    const child = spawn(
      process.execPath,
      [path.join(__dirname, 'fixtures/relay-child.js'), database.url, nats.url, stream, prefix, SCHEMA],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    await waitFor(async () => handled.some((e) => e.id === id), 20000);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    // The dead process's server session would still finish its queued UPDATE once the lock is
    // free; end it, as the crash of a whole pod (or a connection check) would.
    await pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'relay-child'`,
    );
    await locker.query('ROLLBACK');
    locker.release();
    expect(await unpublished(id)).toBe(true);

    // A new relay republishes the row (same message id) and marks it.
    const link2 = new NatsLink([nats.url], { stream, subjectPrefix: prefix }, logger, 'relay-2');
    const relay = new OutboxRelay({
      pool,
      schema: SCHEMA,
      link: link2,
      subjectPrefix: prefix,
      producer: 'events-test',
      logger,
      pollMs: 50,
    });
    link2.start();
    relay.start();
    stoppers.push(
      () => link2.close(),
      () => relay.stop(),
    );
    await waitFor(async () => !(await unpublished(id)), 20000);
    await new Promise((r) => setTimeout(r, 1000));
    expect(handled.filter((e) => e.id === id)).toHaveLength(1);
  });

  it('skips an event id it has already applied even when JetStream delivers it again', async () => {
    if (!(await isUp(nats))) await nats.start();
    // A stream that forgets message ids after a second, so the same event can be stored twice.
    const short = { stream: `${stream}_R`, prefix: `${prefix}_r`, duplicateWindowMs: 1000 };
    const { handled, link } = startPipeline('republish', undefined, short);
    const id = await db().transaction((tx) =>
      writeEvent(tx, outbox, { name: 'signing_key.rotated', orgId: 'org-3', data: {} }),
    );
    await waitFor(async () => handled.some((e) => e.id === id), 20000);
    await new Promise((r) => setTimeout(r, 1500));
    // The same event published again after the dedupe window passed: JetStream stores it.
    const ready = await link.ready();
    const envelope = {
      id,
      type: 'signing_key.rotated',
      created_at: new Date().toISOString(),
      org_id: 'org-3',
      data: {},
    };
    const ack = await ready!.js.publish(`${short.prefix}.signing_key.rotated`, JSON.stringify(envelope), {
      msgID: id,
    });
    expect(ack.duplicate).toBe(false);
    const marker = await db().transaction((tx) =>
      writeEvent(tx, outbox, { name: 'policy.created', orgId: null, data: {} }),
    );
    await waitFor(async () => handled.some((e) => e.id === marker), 20000);
    expect(handled.filter((e) => e.id === id)).toHaveLength(1);
  });

  it('drops an event whose type is not the one its subject names, or whose id is not its message id', async () => {
    if (!(await isUp(nats))) await nats.start();
    // The stream holds earlier tests' events too: handle only this test's org.
    const { handled, deliveries, link } = startPipeline('checked', (e) => e.org_id === 'org-4');
    await waitFor(async () => (await link.ready()) !== undefined, 20000);
    const ready = await link.ready();
    const envelope = (type: string) => ({
      id: randomUUID(),
      type,
      created_at: new Date().toISOString(),
      org_id: 'org-4',
      data: {},
    });
    // A policy.created envelope on an audit subject (what a service allowed to publish audit
    // records but not policy events could try), and a copy of an event under a fresh message id.
    const disguised = envelope('policy.created');
    await ready!.js.publish(`${prefix}.audit.recorded.events-test`, JSON.stringify(disguised), {
      msgID: disguised.id,
    });
    const renamed = envelope('policy.created');
    await ready!.js.publish(`${prefix}.policy.created`, JSON.stringify(renamed), { msgID: randomUUID() });
    const record = await db().transaction((tx) =>
      writeEvent(tx, outbox, { name: 'audit.recorded', orgId: 'org-4', data: {} }),
    );
    await waitFor(async () => handled.some((e) => e.id === record), 20000);
    await new Promise((r) => setTimeout(r, 500));
    expect(handled.map((e) => e.id)).toEqual([record]);
    // The audit record travelled on its producer's subject, and the consumer says whose it is.
    expect(deliveries[0]).toEqual({
      subject: `${prefix}.audit.recorded.events-test`,
      producer: 'events-test',
    });
  });

  it('starts a replacing consumer where the one it replaces stopped, not at the stream’s start', async () => {
    if (!(await isUp(nats))) await nats.start();
    const { handled: old } = startPipeline('replaced');
    const before = await db().transaction((tx) =>
      writeEvent(tx, outbox, { name: 'card.ordered', orgId: 'org-5', data: {} }),
    );
    await waitFor(async () => old.some((e) => e.id === before), 20000);
    // The old consumer is gone (a new release); an event arrives before its successor starts.
    for (const stop of stoppers.splice(0).reverse()) await stop();
    const relayOnly = startPipeline('bystander');
    const after = await db().transaction((tx) =>
      writeEvent(tx, outbox, { name: 'card.ready', orgId: 'org-5', data: {} }),
    );
    await waitFor(async () => relayOnly.handled.some((e) => e.id === after), 20000);
    const handled: EventEnvelope[] = [];
    const successor = new IdempotentConsumer({
      link: relayOnly.link,
      stream,
      durable: 'successor',
      filterSubject: `${prefix}.>`,
      startAfter: 'replaced',
      db: db(),
      inbox,
      logger,
      handler: async (event) => {
        handled.push(event);
      },
    });
    successor.start();
    stoppers.push(() => successor.stop());
    await waitFor(async () => handled.some((e) => e.id === after), 20000);
    await new Promise((r) => setTimeout(r, 500));
    // Nothing from before the old consumer's position: not `before`, nor earlier tests' events.
    expect(handled.map((e) => e.id)).toEqual([after]);
  });

  it('makes a durable again when its subject filter changed (audit records gained a producer token)', async () => {
    if (!(await isUp(nats))) await nats.start();
    const { link, handled: seen } = startPipeline('filter-bystander');
    await waitFor(async () => (await link.ready()) !== undefined, 20000);
    const { jsm } = (await link.ready())!;
    // As an earlier release left it: the filter of audit records without the producer. (NATS 2.9
    // accepts an update of the filter but keeps delivering by the old one: the consumer must see
    // the new record all the same.)
    await jsm.consumers.add(stream, {
      durable_name: 'moved',
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.New,
      filter_subject: `${prefix}.audit.recorded`,
    });
    const handled: EventEnvelope[] = [];
    const consumer = new IdempotentConsumer({
      link,
      stream,
      durable: 'moved',
      filterSubject: `${prefix}.audit.recorded.>`,
      db: db(),
      inbox,
      logger,
      handler: async (event) => {
        handled.push(event);
      },
    });
    consumer.start();
    stoppers.push(() => consumer.stop());
    await waitFor(
      async () =>
        (await jsm.consumers.info(stream, 'moved')).config.filter_subject === `${prefix}.audit.recorded.>`,
      20000,
    );
    const id = await db().transaction((tx) =>
      writeEvent(tx, outbox, { name: 'audit.recorded', orgId: 'org-6', data: {} }),
    );
    await waitFor(async () => seen.some((e) => e.id === id), 20000);
    await waitFor(async () => handled.some((e) => e.id === id), 20000);
  });

  it('acknowledges events the consumer does not accept without handling them or writing the inbox', async () => {
    if (!(await isUp(nats))) await nats.start();
    const { handled } = startPipeline('picky', (e) => e.type !== 'audit.recorded');
    const skipped = await db().transaction((tx) =>
      writeEvent(tx, outbox, { name: 'audit.recorded', orgId: null, data: {} }),
    );
    const taken = await db().transaction((tx) =>
      writeEvent(tx, outbox, { name: 'policy.deleted', orgId: null, data: {} }),
    );
    await waitFor(async () => handled.some((e) => e.id === taken), 20000);
    expect(handled.some((e) => e.id === skipped)).toBe(false);
    const inboxRows = await pool.query(`SELECT event_id FROM ${SCHEMA}.inbox WHERE consumer = 'picky'`);
    const ids = inboxRows.rows.map((r: { event_id: string }) => r.event_id);
    expect(ids).toContain(taken);
    expect(ids).not.toContain(skipped);
  });
});

async function isUp(nats: TestNatsServer): Promise<boolean> {
  const net = await import('node:net');
  return new Promise((resolve) => {
    const s = net.connect(nats.port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
