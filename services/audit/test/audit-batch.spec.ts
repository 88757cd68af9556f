import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Principal } from '@custos/auth';
import {
  IdempotentConsumer,
  NatsLink,
  OutboxGroupCommit,
  OutboxRelay,
  auditRecordedFilter,
  subjectFor,
} from '@custos/events';
import {
  createDatabase,
  createLogger,
  createPool,
  migrateSchema,
  provisionServiceRole,
  serviceRoleName,
} from '@custos/service-kit';
import {
  type TestNatsServer,
  createTestDatabase,
  testNatsServer,
  waitFor,
} from '@custos/service-kit/testing';
import { AuditService } from '../src/chain/audit-service';
import { AuditStore } from '../src/chain/audit-store';
import { AUDIT_TABLE_PRIVILEGES, SCHEMA, inbox } from '../src/db/schema';
import { AUDIT_RECORDED_DURABLE, auditRecordedBatchConsumer } from '../src/events/audit-recorded-consumer';

// The audit consumer as the service runs it (batches, raw prepared statements, as the service's
// own role), fed through a real JetStream stream with backlogs so records arrive many at a time.
const logLines: Array<Record<string, unknown>> = [];
const logger = createLogger({
  service: 'audit-batch-test',
  level: 'warn',
  destination: { write: (line: string) => void logLines.push(JSON.parse(line)) },
});
const key = randomBytes(32);
const ROLE = serviceRoleName('audit');

function owner(orgId: string): Principal {
  return { kind: 'user', userId: randomUUID(), orgId, role: 'owner', amr: [] } as unknown as Principal;
}

describe('the audit consumer chains records in batches (real NATS and Postgres)', () => {
  let nats: TestNatsServer;
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let adminPool: ReturnType<typeof createPool>;
  const pools: Array<ReturnType<typeof createPool>> = [];
  const stoppers: Array<() => Promise<void>> = [];
  let service: AuditService;

  beforeAll(async () => {
    nats = await testNatsServer();
    await nats.start();
    database = await createTestDatabase('custos_audit_batch');
    adminPool = createPool(database.url, 4, logger, 'audit-batch-admin');
    await migrateSchema(adminPool, {
      schema: SCHEMA,
      migrationsFolder: path.join(__dirname, '..', 'migrations'),
    });
    await provisionServiceRole(adminPool, {
      schema: SCHEMA,
      role: ROLE,
      tablePrivileges: AUDIT_TABLE_PRIVILEGES,
    });
    service = new AuditService(new AuditStore(createDatabase(writerPool()), key), key, logger);
  });

  beforeEach(() => {
    logLines.length = 0;
  });

  afterEach(async () => {
    for (const stop of stoppers.splice(0).reverse()) await stop();
  });

  afterAll(async () => {
    for (const p of pools) await p.end();
    await adminPool?.end();
    await database?.drop();
    await nats?.stop();
  });

  /** A pool that logs in as the audit service's own role (each replica has its own). */
  function writerPool(): ReturnType<typeof createPool> {
    const url = new URL(database.url);
    url.username = ROLE;
    const pool = createPool(url.toString(), 4, logger, 'audit-batch-writer');
    pools.push(pool);
    return pool;
  }

  /** A stream of its own for one test. */
  function streamOf(opts: { duplicateWindowMs?: number } = {}) {
    const stream = `AB_${randomBytes(4).toString('hex').toUpperCase()}`;
    const prefix = `ab.${stream.toLowerCase()}`;
    const link = new NatsLink([nats.url], { stream, subjectPrefix: prefix, ...opts }, logger, 'audit-batch');
    link.start();
    stoppers.push(() => link.close());
    return { stream, prefix, link };
  }

  /** A replica of the audit consumer: its own pool, the service's wiring. */
  function replica(s: ReturnType<typeof streamOf>, maxBatch?: number): IdempotentConsumer {
    const pool = writerPool();
    const audit = new AuditService(new AuditStore(createDatabase(pool), key), key, logger);
    const consumer = new IdempotentConsumer({
      link: s.link,
      stream: s.stream,
      durable: AUDIT_RECORDED_DURABLE,
      filterSubject: auditRecordedFilter(s.prefix),
      db: createDatabase(pool),
      pool,
      inbox,
      logger,
      retryDelayMs: 200,
      ...(maxBatch ? { maxBatch } : {}),
      batchHandler: auditRecordedBatchConsumer({ audit, logger, refused: { inc: () => undefined } }),
    });
    stoppers.push(() => consumer.stop());
    return consumer;
  }

  interface Envelope {
    id: string;
    type: string;
    created_at: string;
    org_id: string;
    data: Record<string, unknown>;
  }

  function record(orgId: string, resourceId: string, over: Record<string, unknown> = {}): Envelope {
    return {
      id: randomUUID(),
      type: 'audit.recorded',
      created_at: new Date().toISOString(),
      org_id: orgId,
      data: {
        org_id: orgId,
        actor_type: 'agent',
        actor_id: 'a1',
        action: 'secret.read',
        resource_type: 'secret',
        resource_id: resourceId,
        metadata: { path: resourceId },
        client_ip: '192.0.2.1',
        request_id: randomUUID(),
        occurred_at: new Date().toISOString(),
        ...over,
      },
    };
  }

  /** Publishes in order (each acknowledged by JetStream before the next, so the stream keeps it). */
  async function publish(s: ReturnType<typeof streamOf>, envelopes: Envelope[], producer = 'vault-crypto') {
    await waitFor(async () => (await s.link.ready()) !== undefined, 20000);
    const { js } = (await s.link.ready())!;
    const subject = subjectFor(s.prefix, 'audit.recorded', producer);
    for (let i = 0; i < envelopes.length; i += 100) {
      // Pipelined within a chunk but awaited in order: JetStream stores them in publish order.
      await Promise.all(
        envelopes.slice(i, i + 100).map((e) => js.publish(subject, JSON.stringify(e), { msgID: e.id })),
      );
    }
  }

  const chainedIds = async (orgId: string) =>
    (
      await adminPool.query<{ id: string }>(`SELECT id FROM audit.events WHERE org_id = $1 ORDER BY seq`, [
        orgId,
      ])
    ).rows.map((r) => r.id);
  const processed = async (ids: string[]) =>
    (
      await adminPool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM audit.inbox WHERE consumer = $1 AND event_id = ANY($2::uuid[])`,
        [AUDIT_RECORDED_DURABLE, ids],
      )
    ).rows[0]!.n;
  const allProcessed = (ids: string[]) => async () => (await processed(ids)) === ids.length;

  it('chains interleaved records of several orgs, each org in delivery order, in multi-record transactions', async () => {
    const s = streamOf();
    const orgs = [randomUUID(), randomUUID(), randomUUID()];
    const envelopes = Array.from({ length: 600 }, (_, i) => record(orgs[(i * 7) % 3]!, `r${i}`));
    // A backlog before the consumer starts: it takes many records per transaction.
    await publish(s, envelopes);
    replica(s).start();
    await waitFor(allProcessed(envelopes.map((e) => e.id)), 60000);

    for (const org of orgs) {
      expect(await chainedIds(org)).toEqual(envelopes.filter((e) => e.org_id === org).map((e) => e.id));
      expect(await service.verify(owner(org))).toMatchObject({ chainValid: true, eventsChecked: 200 });
    }
    // Batched: far fewer transactions than records (one per record would be 600).
    expect(await transactionsOf(envelopes.map((e) => e.id))).toBeLessThan(150);
    expect(logLines.filter((l) => l.msg === 'event batch failed; applying its events one at a time')).toEqual(
      [],
    );
  });

  it('adds nothing for records delivered again, whether in one batch or after their batch committed', async () => {
    // A stream that forgets message ids after a second, so the same event can be stored twice.
    const s = streamOf({ duplicateWindowMs: 1000 });
    const orgs = [randomUUID(), randomUUID()];
    const envelopes = Array.from({ length: 40 }, (_, i) => record(orgs[i % 2]!, `r${i}`));
    await publish(s, envelopes);
    await new Promise((r) => setTimeout(r, 1500));
    await publish(s, envelopes);
    const first = replica(s);
    first.start();
    await waitFor(allProcessed(envelopes.map((e) => e.id)), 30000);
    await first.stop();
    // Every message again, under the same durable (its inbox key): a consumer that lost its place.
    const { jsm } = (await s.link.ready())!;
    await jsm.consumers.delete(s.stream, AUDIT_RECORDED_DURABLE);
    const marker = record(orgs[0]!, 'marker');
    await publish(s, [marker]);
    replica(s).start();
    await waitFor(allProcessed([marker.id]), 30000);

    for (const org of orgs) {
      const expected = envelopes.filter((e) => e.org_id === org).map((e) => e.id);
      if (org === orgs[0]) expected.push(marker.id);
      expect(await chainedIds(org)).toEqual(expected);
      expect((await service.verify(owner(org))).chainValid).toBe(true);
    }
    // Both copies of an id in one batch are applied once, not by failing over to one at a time.
    expect(logLines.filter((l) => l.msg === 'event batch failed; applying its events one at a time')).toEqual(
      [],
    );
  });

  it('chains the good records around a poison one, which stays unprocessed and is retried', async () => {
    const s = streamOf();
    const orgId = randomUUID();
    const good = Array.from({ length: 30 }, (_, i) => record(orgId, `g${i}`));
    // Refused by Postgres (jsonb cannot hold \u0000), so it fails the batch's INSERT, not a check.
    const poison = record(orgId, 'poison', { metadata: { note: 'nul\u0000byte' } });
    // Malformed: the audit service refuses it before any SQL.
    const malformed = record(orgId, 'malformed', { occurred_at: 'soon' });
    const envelopes = [...good.slice(0, 10), poison, ...good.slice(10, 20), malformed, ...good.slice(20)];
    await publish(s, envelopes);
    replica(s).start();
    await waitFor(allProcessed(good.map((e) => e.id)), 30000);
    // Retried (naked), so it is delivered again after the good ones went through.
    await waitFor(
      async () =>
        logLines.filter((l) => l.msg === 'event handler failed; will redeliver' && l.event_id === poison.id)
          .length >= 2,
      30000,
    );

    expect(await chainedIds(orgId)).toEqual(good.map((e) => e.id));
    expect(await processed([poison.id, malformed.id])).toBe(0);
    expect((await service.verify(owner(orgId))).chainValid).toBe(true);
    expect(logLines.some((l) => l.msg === 'event batch failed; applying its events one at a time')).toBe(
      true,
    );
  });

  it('keeps every chain linear with two replicas consuming the same records concurrently', async () => {
    const s = streamOf();
    const orgs = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    const envelopes = Array.from({ length: 1200 }, (_, i) => record(orgs[i % 4]!, `r${i}`));
    await publish(s, envelopes);
    const a = replica(s, 64);
    const b = replica(s, 64);
    a.start();
    b.start();
    await waitFor(allProcessed(envelopes.map((e) => e.id)), 60000);

    for (const org of orgs) {
      const result = await service.verify(owner(org));
      expect(result).toMatchObject({ chainValid: true, eventsChecked: 300, eventsVerified: 300 });
      expect((await chainedIds(org)).sort()).toEqual(
        envelopes
          .filter((e) => e.org_id === org)
          .map((e) => e.id)
          .sort(),
      );
    }
    // The heads are locked in org id order by every replica: no deadlock, so no batch failed.
    expect(logLines.filter((l) => l.msg === 'event batch failed; applying its events one at a time')).toEqual(
      [],
    );
  });

  it('chains each record once, in commit order, when the outbox relay sends them several to a message and again', async () => {
    const s = streamOf();
    await waitFor(async () => (await s.link.ready()) !== undefined, 20000);
    // The producer's side as vault-crypto runs it: records group-committed into an outbox, and
    // its relay (here on audit's own outbox table, which nothing else relays in this test).
    const outboxPool = writerPool();
    const commits = new OutboxGroupCommit({ pool: outboxPool, schema: SCHEMA });
    const relay = new OutboxRelay({
      pool: outboxPool,
      schema: SCHEMA,
      link: s.link,
      subjectPrefix: s.prefix,
      producer: 'vault-crypto',
      logger,
      pollMs: 50,
    });
    const orgs = [randomUUID(), randomUUID(), randomUUID()];
    const ids = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        commits.audit({
          orgId: orgs[i % 3]!,
          actorType: 'agent',
          actorId: 'a1',
          action: 'secret.read',
          resourceType: 'secret',
          resourceId: `r${i}`,
          metadata: { path: `r${i}` },
        }),
      ),
    );
    relay.start();
    stoppers.push(() => relay.stop());
    replica(s).start();
    await waitFor(allProcessed(ids), 60000);
    const { jsm } = (await s.link.ready())!;
    const messages = (await jsm.streams.info(s.stream)).state.messages;
    expect(messages).toBeLessThan(ids.length / 10);

    const committed = async (org: string) =>
      (
        await adminPool.query<{ id: string }>(`SELECT id FROM audit.outbox WHERE org_id = $1 ORDER BY seq`, [
          org,
        ])
      ).rows.map((r) => r.id);
    for (const org of orgs) {
      expect(await chainedIds(org)).toEqual(await committed(org));
      expect(await service.verify(owner(org))).toMatchObject({ chainValid: true, eventsChecked: 100 });
    }

    // Published again (a relay that could not mark them), with a few new ones: only those are added.
    await adminPool.query(`UPDATE audit.outbox SET published_at = NULL WHERE id = ANY($1::uuid[])`, [
      ids.slice(50),
    ]);
    const late = await Promise.all(
      orgs.map((orgId) =>
        commits.audit({
          orgId,
          actorType: 'agent',
          actorId: 'a1',
          action: 'secret.read',
          resourceType: 'secret',
          resourceId: 'late',
        }),
      ),
    );
    relay.nudge();
    await waitFor(allProcessed(late), 30000);
    await waitFor(
      async () =>
        (await adminPool.query(`SELECT 1 FROM audit.outbox WHERE published_at IS NULL`)).rowCount === 0,
      30000,
    );
    await new Promise((r) => setTimeout(r, 500));
    expect((await jsm.streams.info(s.stream)).state.messages).toBeGreaterThan(messages);
    for (const org of orgs) {
      expect(await chainedIds(org)).toEqual(await committed(org));
      expect(await service.verify(owner(org))).toMatchObject({ chainValid: true, eventsChecked: 101 });
    }
  });

  /** In how many transactions the events were recorded (inbox rows of one share its now()). */
  async function transactionsOf(ids: string[]): Promise<number> {
    const r = await adminPool.query<{ n: number }>(
      `SELECT count(DISTINCT processed_at)::int AS n FROM audit.inbox WHERE event_id = ANY($1::uuid[])`,
      [ids],
    );
    return r.rows[0]!.n;
  }
});
