import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Principal } from '@custos/auth';
import {
  IdempotentConsumer,
  NATS_SERVICES,
  type NatsService,
  NatsLink,
  auditRecordedFilter,
  inboxPrefixOf,
  natsServerConfig,
  serviceNatsUsers,
  subjectFor,
} from '@custos/events';
import { createDatabase, createLogger, createPool, migrateSchema, type Database } from '@custos/service-kit';
import {
  type TestNatsServer,
  createTestDatabase,
  testNatsServer,
  waitFor,
} from '@custos/service-kit/testing';
import { Counter, Registry } from 'prom-client';
import { AuditService } from '../src/chain/audit-service';
import { AuditStore } from '../src/chain/audit-store';
import { SCHEMA, auditEvents, inbox } from '../src/db/schema';
import { AUDIT_RECORDED_DURABLE, auditRecordedBatchConsumer } from '../src/events/audit-recorded-consumer';
import { eq } from 'drizzle-orm';

const logger = createLogger({ service: 'audit-producers-test', level: 'silent' });
const key = randomBytes(32);

function owner(orgId: string): Principal {
  return {
    kind: 'user',
    userId: randomUUID(),
    orgId,
    role: 'owner',
    scopes: [],
    amr: ['pwd'],
    tokenId: randomUUID(),
  } as unknown as Principal;
}

// The audit consumer behind a nats-server with the generated per-service users: each producer
// publishes on its own subject with its own login, and audit chains only what that producer may
// record.
describe('audit records checked against their producer (real NATS and Postgres)', () => {
  const stream = `AUD_${randomBytes(4).toString('hex').toUpperCase()}`;
  const prefix = `aud.${stream.toLowerCase()}`;
  const passwords = Object.fromEntries(
    Object.keys(NATS_SERVICES).map((s) => [s, randomBytes(12).toString('hex')]),
  ) as Record<NatsService, string>;
  let nats: TestNatsServer;
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let db: Database;
  let service: AuditService;
  const registry = new Registry();
  const refused = new Counter({
    name: 'custos_audit_records_refused_total',
    help: 'test',
    labelNames: ['producer'],
    registers: [registry],
  });
  const links: NatsLink[] = [];
  let consumer: IdempotentConsumer;

  function linkOf(service: NatsService): NatsLink {
    const link = new NatsLink([nats.url], { stream, subjectPrefix: prefix }, logger, `test-${service}`, {
      user: service,
      password: passwords[service],
      inboxPrefix: inboxPrefixOf(service),
    });
    link.start();
    links.push(link);
    return link;
  }

  beforeAll(async () => {
    nats = await testNatsServer(undefined, ({ port, storeDir }) =>
      natsServerConfig({
        host: '127.0.0.1',
        port,
        storeDir,
        users: serviceNatsUsers({ prefix, stream }, passwords),
      }),
    );
    await nats.start();
    database = await createTestDatabase('custos_audit_producers');
    pool = createPool(database.url, 4, logger, 'audit-producers');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    db = createDatabase(pool);
    service = new AuditService(new AuditStore(db, key), key, logger);
    consumer = new IdempotentConsumer({
      link: linkOf('audit'),
      stream,
      durable: AUDIT_RECORDED_DURABLE,
      filterSubject: auditRecordedFilter(prefix),
      db,
      pool,
      inbox,
      logger,
      // As the service runs it: the records at hand chained in one transaction.
      batchHandler: auditRecordedBatchConsumer({ audit: service, logger, refused }),
    });
    consumer.start();
  });

  afterAll(async () => {
    await consumer?.stop();
    for (const l of links) await l.close();
    await pool?.end();
    await database?.drop();
    await nats?.stop();
  });

  /** Publishes an audit record for `action` with `as`'s NATS login on its own subject; returns its id. */
  async function publishAs(as: NatsService, orgId: string, action: string, producer = as): Promise<string> {
    const link = linkOf(as);
    await waitFor(async () => (await link.ready()) !== undefined, 20000);
    const id = randomUUID();
    const envelope = {
      id,
      type: 'audit.recorded',
      created_at: new Date().toISOString(),
      org_id: orgId,
      data: {
        org_id: orgId,
        actor_type: 'user',
        actor_id: randomUUID(),
        action,
        resource_type: action.split('.')[0],
        resource_id: 'r1',
        metadata: {},
        client_ip: null,
        request_id: null,
        occurred_at: new Date().toISOString(),
      },
    };
    const { js } = (await link.ready())!;
    await js.publish(subjectFor(prefix, 'audit.recorded', producer), JSON.stringify(envelope), { msgID: id });
    return id;
  }

  const processed = async (id: string) =>
    (
      await pool.query(`SELECT 1 FROM audit.inbox WHERE consumer = $1 AND event_id = $2`, [
        AUDIT_RECORDED_DURABLE,
        id,
      ])
    ).rowCount === 1;
  const refusedOf = async (producer: string) =>
    (await refused.get()).values.find((v) => v.labels.producer === producer)?.value ?? 0;

  it('chains secret.read from vault-crypto and refuses it from webhook-dispatcher', async () => {
    const orgId = randomUUID();
    const before = await refusedOf('webhook-dispatcher');
    const forged = await publishAs('webhook-dispatcher', orgId, 'secret.read');
    const real = await publishAs('vault-crypto', orgId, 'secret.read');
    await waitFor(async () => (await processed(forged)) && (await processed(real)), 20000);

    const { events } = await service.list(owner(orgId), { limit: 10, offset: 0 });
    expect(events.map((e) => e.id)).toEqual([real]);
    const rows = await db.select().from(auditEvents).where(eq(auditEvents.orgId, orgId));
    expect(rows.map((r) => [r.id, r.producer])).toEqual([[real, 'vault-crypto']]);
    // Refused once: acknowledged with its inbox row, counted, never chained.
    expect(await refusedOf('webhook-dispatcher')).toBe(before + 1);
    expect((await service.verify(owner(orgId))).chainValid).toBe(true);
  });

  it('chains what a producer may record about its own resources', async () => {
    const orgId = randomUUID();
    const own = await publishAs('webhook-dispatcher', orgId, 'webhook.created');
    await waitFor(() => processed(own), 20000);
    const rows = await db.select().from(auditEvents).where(eq(auditEvents.orgId, orgId));
    expect(rows.map((r) => [r.action, r.producer])).toEqual([['webhook.created', 'webhook-dispatcher']]);
  });

  it('never lets a producer publish under another service’s name', async () => {
    await expect(
      publishAs('webhook-dispatcher', randomUUID(), 'secret.read', 'vault-crypto'),
    ).rejects.toThrow(/Permissions Violation/);
  });

  it('stores `audit` as the producer of the records it makes itself', async () => {
    const orgId = randomUUID();
    const id = await service.record(owner(orgId), {
      action: 'ip_rule.denied',
      resourceType: 'ip_rule',
      resourceId: '',
      details: {},
    });
    const rows = await db.select().from(auditEvents).where(eq(auditEvents.id, id));
    expect(rows[0]?.producer).toBe('audit');
  });
});
