import { randomUUID } from 'node:crypto';
import { createLogger } from '@custos/service-kit';
import {
  createTestDatabase,
  testNatsServer,
  waitFor,
  type TestNatsServer,
} from '@custos/service-kit/testing';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { IdempotentConsumer, NatsLink, type ConsumedEvent } from '../src';
import { batchMessageId } from '../src/event-batch';
import { DDL, SCHEMA, inbox } from './fixtures/schema';

// IdempotentConsumer with a batch handler, against real JetStream and Postgres: what the handler
// gets, what is checked before, and what happens when a batch fails.
const logLines: Array<Record<string, unknown>> = [];
const logger = createLogger({
  service: 'consumer-batch-test',
  level: 'warn',
  destination: { write: (line: string) => void logLines.push(JSON.parse(line)) },
});

describe('IdempotentConsumer with a batch handler', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: pg.Pool;
  let nats: TestNatsServer;
  let link: NatsLink;
  const stream = `BAT_${randomUUID().slice(0, 8)}`;
  const prefix = `batch.${stream.toLowerCase()}`;
  const stoppers: Array<() => Promise<void>> = [];

  beforeAll(async () => {
    database = await createTestDatabase('custos_events_batch');
    pool = new pg.Pool({ connectionString: database.url, max: 4 });
    pool.on('error', () => undefined);
    await pool.query(DDL);
    await pool.query(`CREATE TABLE ${SCHEMA}.applied (n serial PRIMARY KEY, event_id uuid NOT NULL)`);
    nats = await testNatsServer();
    await nats.start();
    link = new NatsLink([nats.url], { stream, subjectPrefix: prefix }, logger, 'batch-test');
    link.start();
    await waitFor(async () => (await link.ready()) !== undefined, 20000);
  });

  beforeEach(() => {
    logLines.length = 0;
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

  /** A consumer of `policy.*` events of one org that records what it applies in `applied`. */
  function consumer(
    durable: string,
    orgId: string,
    fail?: (e: ConsumedEvent) => boolean,
    o: { maxPendingMessages?: number; maxBatch?: number; before?: () => Promise<void> } = {},
  ) {
    const batches: ConsumedEvent[][] = [];
    const c = new IdempotentConsumer({
      link,
      stream,
      durable,
      filterSubject: `${prefix}.policy.>`,
      db: drizzle(pool),
      pool,
      inbox,
      logger,
      retryDelayMs: 200,
      accept: (e) => e.org_id === orgId,
      ...(o.maxPendingMessages ? { maxPendingMessages: o.maxPendingMessages } : {}),
      ...(o.maxBatch ? { maxBatch: o.maxBatch } : {}),
      batchHandler: async (events, client) => {
        batches.push(events);
        await o.before?.();
        for (const e of events) {
          if (fail?.(e)) throw new Error(`handler refused ${e.event.id}`);
          await client.query(`INSERT INTO ${SCHEMA}.applied (event_id) VALUES ($1)`, [e.event.id]);
        }
      },
    });
    c.start();
    stoppers.push(() => c.stop());
    return { batches, c };
  }

  async function publish(
    orgId: string,
    n: number,
    over: (
      i: number,
      id: string,
    ) => { subject?: string; type?: string; msgID?: string; body?: string } = () => ({}),
  ): Promise<string[]> {
    const { js } = (await link.ready())!;
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const id = randomUUID();
      const o = over(i, id);
      const envelope = {
        id,
        type: o.type ?? 'policy.updated',
        created_at: new Date().toISOString(),
        org_id: orgId,
        data: { i },
      };
      await js.publish(o.subject ?? `${prefix}.policy.updated`, o.body ?? JSON.stringify(envelope), {
        msgID: o.msgID ?? id,
      });
      ids.push(id);
    }
    return ids;
  }

  const applied = async (ids: string[]) =>
    (
      await pool.query<{ event_id: string }>(
        `SELECT event_id FROM ${SCHEMA}.applied WHERE event_id = ANY($1::uuid[]) ORDER BY n`,
        [ids],
      )
    ).rows.map((r) => r.event_id);
  const inInbox = async (durable: string, ids: string[]) =>
    (
      await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${SCHEMA}.inbox WHERE consumer = $1 AND event_id = ANY($2::uuid[])`,
        [durable, ids],
      )
    ).rows[0]!.n;

  it('hands the events at hand over together, in delivery order, and each event once', async () => {
    const orgId = randomUUID();
    const ids = await publish(orgId, 120);
    const { batches } = consumer('together', orgId);
    await waitFor(async () => (await inInbox('together', ids)) === ids.length, 30000);
    expect(await applied(ids)).toEqual(ids);
    expect(batches.flat().map((e) => e.event.id)).toEqual(ids);
    expect(Math.max(...batches.map((b) => b.length))).toBeGreaterThan(1);
    expect(batches[0]![0]!.delivery).toEqual({ subject: `${prefix}.policy.updated`, producer: null });

    // Delivered again under the same durable (it lost its place): nothing reaches the handler.
    await stoppers.splice(0).reverse()[0]!();
    const { jsm } = (await link.ready())!;
    await jsm.consumers.delete(stream, 'together');
    const [marker] = await publish(orgId, 1);
    const again = consumer('together', orgId);
    await waitFor(async () => (await inInbox('together', [marker!])) === 1, 30000);
    expect(again.batches.flat().map((e) => e.event.id)).toEqual([marker]);
    expect(await applied(ids)).toEqual(ids);
  });

  it('drops, in a batch too, a malformed event, a type its subject does not name and an id that is not its message id', async () => {
    const orgId = randomUUID();
    const ids = await publish(orgId, 5, (i, id) =>
      i === 1
        ? { subject: `${prefix}.policy.created` } // type policy.updated on the policy.created subject
        : i === 2
          ? { msgID: randomUUID() }
          : i === 3
            ? {
                body: JSON.stringify({ id: 'not-a-uuid', type: 'policy.updated', org_id: orgId }),
                msgID: 'not-a-uuid',
              }
            : { msgID: id },
    );
    const { batches } = consumer('checked', orgId);
    await waitFor(async () => (await inInbox('checked', [ids[0]!, ids[4]!])) === 2, 30000);
    await new Promise((r) => setTimeout(r, 500));
    expect(batches.flat().map((e) => e.event.id)).toEqual([ids[0], ids[4]]);
    expect(await inInbox('checked', ids)).toBe(2);
    expect(logLines.map((l) => l.msg)).toEqual(
      expect.arrayContaining([
        'dropping an event whose type is not the one its subject names',
        'dropping an event whose id is not its message id',
        'dropping malformed event',
      ]),
    );
  });

  it('applies the rest of a failed batch one event at a time and redelivers only the failing one', async () => {
    const orgId = randomUUID();
    let poisonId = '';
    const ids = await publish(orgId, 40, (i, id) => {
      if (i === 17) poisonId = id;
      return {};
    });
    const good = ids.filter((id) => id !== poisonId);
    const { batches } = consumer('poisoned', orgId, (e) => e.event.id === poisonId);
    await waitFor(async () => (await inInbox('poisoned', good)) === good.length, 30000);
    await waitFor(
      async () => batches.filter((b) => b.length === 1 && b[0]!.event.id === poisonId).length >= 3 && true,
      30000,
    );
    // The good events once each (the failed batch rolled back), in delivery order; never the poison.
    expect(await applied(ids)).toEqual(good);
    expect(await inInbox('poisoned', [poisonId])).toBe(0);
    expect(logLines.some((l) => l.msg === 'event batch failed; applying its events one at a time')).toBe(
      true,
    );
  });
  /** A consumer of `policy.*` events of one org with a one-event-per-transaction handler. */
  function singleConsumer(durable: string, orgId: string, fail?: (id: string) => boolean) {
    const calls: string[] = [];
    const c = new IdempotentConsumer({
      link,
      stream,
      durable,
      filterSubject: `${prefix}.policy.>`,
      db: drizzle(pool),
      inbox,
      logger,
      retryDelayMs: 200,
      accept: (e) => e.org_id === orgId,
      handler: async (event, tx) => {
        calls.push(event.id);
        if (fail?.(event.id)) throw new Error(`handler refused ${event.id}`);
        await tx.execute(sql`INSERT INTO ${sql.raw(SCHEMA)}.applied (event_id) VALUES (${event.id})`);
      },
    });
    c.start();
    stoppers.push(() => c.stop());
    return { calls, c };
  }

  const envelope = (orgId: string, i: number, type = 'policy.updated') => ({
    id: randomUUID() as string,
    type,
    created_at: new Date().toISOString(),
    org_id: orgId,
    data: { i },
  });

  /** Publishes envelopes as one batch message, as the outbox relay does (its id unless `msgID`). */
  async function publishBatch(
    envelopes: Array<ReturnType<typeof envelope>>,
    o: { msgID?: string } = {},
  ): Promise<string[]> {
    const { js } = (await link.ready())!;
    const ids = envelopes.map((e) => e.id);
    await js.publish(`${prefix}.policy.updated`, JSON.stringify({ events: envelopes }), {
      msgID: o.msgID ?? batchMessageId(ids),
    });
    return ids;
  }

  it('applies the events of batch messages and of plain ones alike, in delivery order, each once', async () => {
    const orgId = randomUUID();
    const a = await publish(orgId, 3);
    const b = await publishBatch(Array.from({ length: 20 }, (_, i) => envelope(orgId, i)));
    // A batch holding an event of another type than its subject names: that event alone is dropped.
    const wrong = envelope(orgId, 99, 'policy.created');
    const mixed = [envelope(orgId, 0), wrong, envelope(orgId, 1)];
    await publishBatch(mixed);
    // The same events again, cut into another batch (as a relay's retry may): none applied twice.
    const again = await publishBatch(Array.from({ length: 4 }, (_, i) => envelope(orgId, i)));
    await publishBatch([...again].reverse().map((id) => ({ ...envelope(orgId, 0), id })));
    const c = await publish(orgId, 2);
    const expected = [...a, ...b, mixed[0]!.id, mixed[2]!.id, ...again, ...c];
    const { batches } = consumer('mixed-forms', orgId);
    await waitFor(async () => (await inInbox('mixed-forms', expected)) === expected.length, 30000);
    await new Promise((r) => setTimeout(r, 300));
    expect(await applied(expected)).toEqual(expected);
    expect(batches.flat().map((e) => e.event.id)).toEqual(expected);
    expect(batches[0]![0]!.delivery).toEqual({ subject: `${prefix}.policy.updated`, producer: null });
    expect(await inInbox('mixed-forms', [wrong.id])).toBe(0);
    expect(logLines.map((l) => l.msg)).toContain(
      'dropping an event whose type is not the one its subject names',
    );

    // A consumer with a one-event handler reads both forms too.
    const single = singleConsumer('mixed-forms-single', orgId);
    await waitFor(async () => (await inInbox('mixed-forms-single', expected)) === expected.length, 30000);
    await new Promise((r) => setTimeout(r, 300));
    expect(single.calls).toEqual(expected);
  });

  it('drops a batch whose message id is not the batch id of its events, and a malformed batch', async () => {
    const orgId = randomUUID();
    const forged = await publishBatch([envelope(orgId, 0), envelope(orgId, 1)], { msgID: randomUUID() });
    const { js } = (await link.ready())!;
    await js.publish(`${prefix}.policy.updated`, JSON.stringify({ events: [{ id: 7 }] }), {
      msgID: randomUUID(),
    });
    const [marker] = await publish(orgId, 1);
    const { batches } = consumer('forged', orgId);
    await waitFor(async () => (await inInbox('forged', [marker!])) === 1, 30000);
    expect(batches.flat().map((e) => e.event.id)).toEqual([marker]);
    expect(await inInbox('forged', forged)).toBe(0);
    expect(logLines.map((l) => l.msg)).toEqual(
      expect.arrayContaining([
        'dropping an event whose id is not its message id',
        'dropping malformed event batch',
      ]),
    );
  });

  it('lets NATS hand over only maxPendingMessages of batch messages ahead of its buffer', async () => {
    const orgId = randomUUID();
    // Ten batch messages of 20 events (~7 KB each), and a handler held on its first batch.
    const pad = 'x'.repeat(200);
    const ids: string[] = [];
    for (let m = 0; m < 10; m++)
      ids.push(
        ...(await publishBatch(
          Array.from({ length: 20 }, (_, i) => {
            const e = envelope(orgId, i);
            return { ...e, data: { ...e.data, pad } };
          }),
        )),
      );
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const { batches } = consumer('bounded-bytes', orgId, undefined, {
      maxPendingMessages: 2,
      maxBatch: 20,
      before: () => (batches.length === 1 ? held : Promise.resolve()),
    });
    const { jsm } = (await link.ready())!;
    await waitFor(async () => batches.length === 1, 30000);
    await new Promise((r) => setTimeout(r, 500));
    const pending = (await jsm.consumers.info(stream, 'bounded-bytes')).num_ack_pending;
    // One message in the handler, one in the consumer's buffer (a batch's worth of events), and
    // the two NATS may hand over. With the single consumer's 64, all ten would be out.
    expect(pending).toBeGreaterThanOrEqual(2);
    expect(pending).toBeLessThanOrEqual(4);
    release();
    await waitFor(async () => (await inInbox('bounded-bytes', ids)) === ids.length, 30000);
    expect(await applied(ids)).toEqual(ids);
  });

  it('redelivers a batch message whose event fails, applying its other events once', async () => {
    const orgId = randomUUID();
    const envelopes = Array.from({ length: 12 }, (_, i) => envelope(orgId, i));
    const poisonId = envelopes[5]!.id;
    const first = await publishBatch(envelopes.slice(0, 8));
    const rest = await publish(orgId, 4);
    const good = [...first, ...rest].filter((id) => id !== poisonId);
    const { batches } = consumer('poisoned-batch', orgId, (e) => e.event.id === poisonId);
    await waitFor(async () => (await inInbox('poisoned-batch', good)) === good.length, 30000);
    // The message comes again (naked): only the poison reaches the handler again.
    await waitFor(
      async () => batches.filter((b) => b.length === 1 && b[0]!.event.id === poisonId).length >= 3,
      30000,
    );
    expect(await applied([...first, ...rest])).toEqual(good);
    expect(await inInbox('poisoned-batch', [poisonId])).toBe(0);

    // The same with a one-event handler: the batch's other events are applied once.
    const orgB = randomUUID();
    const more = Array.from({ length: 6 }, (_, i) => envelope(orgB, i));
    const bad = more[2]!.id;
    const ids = await publishBatch(more);
    const single = singleConsumer('poisoned-batch-single', orgB, (id) => id === bad);
    const fine = ids.filter((id) => id !== bad);
    await waitFor(async () => single.calls.filter((id) => id === bad).length >= 3, 30000);
    expect(await applied(ids)).toEqual(fine);
    expect(await inInbox('poisoned-batch-single', ids)).toBe(fine.length);
    // Redelivered, but only the failing event ran again.
    expect(single.calls.filter((id) => id !== bad)).toEqual(fine);
  });
});
