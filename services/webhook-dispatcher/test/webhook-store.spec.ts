import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Principal } from '@custos/auth';
import {
  NotFoundError,
  PermissionDeniedError,
  createDatabase,
  createLogger,
  createPool,
  migrateSchema,
  type Database,
} from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { SCHEMA } from '../src/db/schema';
import { subscribableEventConsumer } from '../src/events/subscribable-event-consumer';
import { WebhookService } from '../src/webhooks/webhook-service';
import { WebhookStore } from '../src/webhooks/webhook-store';

const logger = createLogger({ service: 'webhook-test', level: 'silent' });

describe('deliveries in Postgres', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let db: Database;
  let store: WebhookStore;

  beforeAll(async () => {
    database = await createTestDatabase('custos_webhooks');
    pool = createPool(database.url, 16, logger, 'webhook-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    db = createDatabase(pool);
    store = new WebhookStore(db);
  });
  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  async function hook(orgId: string = randomUUID()) {
    return store.insert({
      id: randomUUID(),
      orgId,
      url: 'https://example.com/h',
      events: ['policy.created', 'policy.deleted'],
      description: '',
      createdBy: randomUUID(),
      secretSealed: 'v1.x.y.z',
    });
  }

  const event = (webhookId: string, orgId: string, eventId = randomUUID()) => ({
    webhookId,
    orgId,
    eventId,
    eventType: 'policy.created',
    body: '{}',
  });

  it('makes one delivery per webhook and event, however often the event is applied', async () => {
    const h = await hook();
    const e = event(h.id, h.orgId);
    const results = await Promise.all(Array.from({ length: 20 }, () => store.insertDeliveries([e])));
    expect(results.reduce((a, b) => a + b, 0)).toBe(1);
    const r = await pool.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.deliveries WHERE webhook_id = $1`, [
      h.id,
    ]);
    expect(r.rows[0].n).toBe(1);
  });

  it('finds subscribers by org, event and active flag', async () => {
    const h = await hook();
    await hook(h.orgId);
    await store.update(h.orgId, h.id, { isActive: false });
    const now = new Date(Date.now() + 1000);
    const subs = await store.subscribers(h.orgId, 'policy.created', now);
    expect(subs).toHaveLength(1);
    expect(subs[0]!.id).not.toBe(h.id);
    expect(await store.subscribers(h.orgId, 'approval.created', now)).toHaveLength(0);
    expect(await store.subscribers(randomUUID(), 'policy.created', now)).toHaveLength(0);
    // An event from before the webhook existed does not reach it.
    expect(await store.subscribers(h.orgId, 'policy.created', new Date(Date.now() - 60000))).toHaveLength(0);
  });

  it('never hands the same due delivery to two workers claiming at once, and a lease keeps it claimed', async () => {
    await pool.query(`UPDATE ${SCHEMA}.deliveries SET status = 'succeeded'`);
    const h = await hook();
    await store.insertDeliveries(Array.from({ length: 40 }, () => event(h.id, h.orgId)));
    const claims = await Promise.all(Array.from({ length: 8 }, () => store.claimDue(10, 60000, 100)));
    const ids = claims.flat().map((c) => c.id);
    expect(ids).toHaveLength(40);
    expect(new Set(ids).size).toBe(40);
    expect(await store.claimDue(10, 60000, 100)).toHaveLength(0);
    // An expired lease (a worker that died) makes the delivery claimable again.
    await pool.query(
      `UPDATE ${SCHEMA}.deliveries SET lease_until = now() - interval '1 second' WHERE id = $1`,
      [ids[0]],
    );
    expect((await store.claimDue(10, 60000, 100)).map((c) => c.id)).toEqual([ids[0]]);
  });

  it('gives one org at most its share of leases, so other orgs are still served', async () => {
    await pool.query(`UPDATE ${SCHEMA}.deliveries SET status = 'succeeded'`);
    const noisy = await hook();
    const quiet = await hook();
    await store.insertDeliveries(Array.from({ length: 30 }, () => event(noisy.id, noisy.orgId)));
    await store.insertDeliveries([event(quiet.id, quiet.orgId)]);
    const first = await store.claimDue(8, 60000, 2);
    expect(first.filter((c) => c.webhookId === noisy.id)).toHaveLength(2);
    expect(first.filter((c) => c.webhookId === quiet.id)).toHaveLength(1);
    // The noisy org's two leases are still held: it gets nothing more until one ends.
    expect(await store.claimDue(8, 60000, 2)).toHaveLength(0);
    await pool.query(
      `UPDATE ${SCHEMA}.deliveries SET lease_until = NULL, status = 'succeeded' WHERE id = $1`,
      [first.find((c) => c.webhookId === noisy.id)!.id],
    );
    expect(await store.claimDue(8, 60000, 2)).toHaveLength(1);
  });

  it('records an attempt once even when two workers report it', async () => {
    await pool.query(`UPDATE ${SCHEMA}.deliveries SET status = 'succeeded'`);
    const h = await hook();
    await store.insertDeliveries([event(h.id, h.orgId)]);
    const [d] = await store.claimDue(1, 60000);
    const outcome = {
      statusCode: 500,
      durationMs: 3,
      error: 'HTTP 500',
      attemptedAt: new Date(),
      status: 'pending' as const,
      nextAttemptAt: new Date(Date.now() + 60000),
    };
    const recorded = await Promise.all(
      Array.from({ length: 6 }, () => store.recordAttempt(d!.id, 1, outcome)),
    );
    expect(recorded.filter(Boolean)).toHaveLength(1);
    const list = await store.listDeliveries(h.id, { limit: 10, offset: 0 });
    expect(list.deliveries[0]).toMatchObject({ status: 'pending', attemptCount: 1 });
    expect(list.deliveries[0]!.attempts).toHaveLength(1);
    // Not due yet: the retry waits for next_attempt_at.
    expect(await store.claimDue(10, 60000)).toHaveLength(0);
    expect(
      await store.recordAttempt(d!.id, 2, {
        ...outcome,
        statusCode: 200,
        error: '',
        status: 'succeeded',
        nextAttemptAt: null,
      }),
    ).toBe(true);
    const done = await store.listDeliveries(h.id, { limit: 10, offset: 0, status: 'succeeded' });
    expect(done.deliveries[0]).toMatchObject({
      status: 'succeeded',
      attemptCount: 2,
      completedAt: expect.any(Date),
    });
    // A finished delivery takes no more attempts.
    expect(await store.recordAttempt(d!.id, 3, outcome)).toBe(false);
  });

  it('does not claim deliveries of a paused webhook, and deleting a webhook deletes its history', async () => {
    await pool.query(`UPDATE ${SCHEMA}.deliveries SET status = 'succeeded'`);
    const h = await hook();
    await store.insertDeliveries([event(h.id, h.orgId)]);
    await store.update(h.orgId, h.id, { isActive: false });
    expect(await store.claimDue(10, 60000)).toHaveLength(0);
    await store.delete(h.orgId, h.id);
    const r = await pool.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.deliveries WHERE webhook_id = $1`, [
      h.id,
    ]);
    expect(r.rows[0].n).toBe(0);
  });

  it('purges finished deliveries older than the retention, never pending ones', async () => {
    const h = await hook();
    await store.insertDeliveries([event(h.id, h.orgId), event(h.id, h.orgId)]);
    await pool.query(
      `UPDATE ${SCHEMA}.deliveries SET status = 'failed', completed_at = now() - interval '40 days'
       WHERE id = (SELECT id FROM ${SCHEMA}.deliveries WHERE webhook_id = $1 LIMIT 1)`,
      [h.id],
    );
    expect(await store.purgeFinished(new Date(Date.now() - 30 * 86_400_000))).toBeGreaterThanOrEqual(1);
    const left = await store.listDeliveries(h.id, { limit: 10, offset: 0 });
    expect(left.deliveries.map((d) => d.status)).toEqual(['pending']);
  });

  describe('who may manage webhooks', () => {
    const user = (orgId: string, role: 'owner' | 'admin' | 'member') =>
      ({
        kind: 'user',
        userId: randomUUID(),
        orgId,
        role,
        platformAdmin: false,
        amr: [],
      }) as unknown as Principal;
    const agent = (orgId: string) =>
      ({ kind: 'agent', agentId: randomUUID(), orgId, scopes: [], vaultIds: [] }) as unknown as Principal;

    it('lets owners and admins, refuses members and agents on every operation, and hides other orgs', async () => {
      const service = new WebhookService({
        store,
        secretKey: Buffer.alloc(32, 1),
        checkDestination: async (url) => url,
      });
      const orgId = randomUUID();
      const body = { url: 'https://example.com/h', events: ['policy.created'], description: '' };
      const created = await service.create(user(orgId, 'owner'), body);
      await expect(service.get(user(orgId, 'admin'), created.webhook.id)).resolves.toMatchObject({
        url: body.url,
      });
      for (const p of [user(orgId, 'member'), agent(orgId)]) {
        const calls = [
          () => service.create(p, body),
          () => service.list(p),
          () => service.get(p, created.webhook.id),
          () => service.update(p, created.webhook.id, { isActive: false }),
          () => service.delete(p, created.webhook.id),
          () => service.deliveries(p, created.webhook.id, { limit: 10, offset: 0 }),
        ];
        for (const call of calls) await expect(call()).rejects.toBeInstanceOf(PermissionDeniedError);
      }
      const stranger = user(randomUUID(), 'owner');
      await expect(service.get(stranger, created.webhook.id)).rejects.toBeInstanceOf(NotFoundError);
      await expect(service.update(stranger, created.webhook.id, { isActive: false })).rejects.toBeInstanceOf(
        NotFoundError,
      );
      await expect(service.delete(stranger, created.webhook.id)).rejects.toBeInstanceOf(NotFoundError);
      const still = await service.get(user(orgId, 'owner'), created.webhook.id);
      expect(still.isActive).toBe(true);
      expect((await service.list(user(orgId, 'owner'))).map((w) => w.id)).toEqual([created.webhook.id]);
    });

    it('patches only the fields given, clears a description with an empty one, and audits what changed', async () => {
      const service = new WebhookService({
        store,
        secretKey: Buffer.alloc(32, 1),
        checkDestination: async (url) => url,
      });
      const owner = user(randomUUID(), 'owner');
      const { webhook } = await service.create(owner, {
        url: ' https://example.com/p ',
        events: ['policy.deleted', 'policy.created', 'policy.created'],
        description: 'ops',
      });
      expect(webhook).toMatchObject({
        url: 'https://example.com/p',
        events: ['policy.created', 'policy.deleted'],
      });
      expect(webhook).not.toHaveProperty('secretSealed');
      const paused = await service.update(owner, webhook.id, { isActive: false, description: '' });
      expect(paused).toMatchObject({
        isActive: false,
        description: '',
        events: webhook.events,
        url: webhook.url,
      });
      await expect(service.update(owner, webhook.id, {})).rejects.toMatchObject({ field: 'body' });
      await expect(service.update(owner, webhook.id, { events: ['secret.read'] })).rejects.toMatchObject({
        field: 'events',
        message: expect.stringContaining('secret.read'),
      });
      await expect(service.update(owner, webhook.id, { description: 'a\u0000b' })).rejects.toMatchObject({
        field: 'description',
      });
      const audited = await pool.query(
        `SELECT payload AS d FROM ${SCHEMA}.outbox
         WHERE name = 'audit.recorded' AND payload->>'resource_id' = $1`,
        [webhook.id],
      );
      const records = audited.rows.map((r) => r.d as Record<string, unknown>);
      expect(records.map((r) => r['action']).sort()).toEqual(['webhook.created', 'webhook.updated']);
      expect(records.find((r) => r['action'] === 'webhook.updated')).toMatchObject({
        actor_type: 'user',
        resource_type: 'webhook',
        metadata: { changed: ['description', 'is_active'], host: 'example.com', is_active: false },
      });
    });

    it('fans an event out to each subscribed active webhook of its org, once', async () => {
      const h = await hook();
      const fanOut = subscribableEventConsumer({ store });
      const e = {
        id: randomUUID(),
        type: 'policy.created',
        created_at: new Date(Date.now() + 1000).toISOString(),
        org_id: h.orgId,
        data: { policy_id: 'p1' },
      };
      expect(await db.transaction((tx) => fanOut(e as never, tx))).toBe(1);
      expect(await db.transaction((tx) => fanOut(e as never, tx))).toBe(0);
      expect(await db.transaction((tx) => fanOut({ ...e, org_id: 'nope' } as never, tx))).toBe(0);
      expect(await db.transaction((tx) => fanOut({ ...e, type: 'audit.recorded' } as never, tx))).toBe(0);
      const list = await store.listDeliveries(h.id, { limit: 10, offset: 0 });
      expect(list.deliveries.map((d) => d.eventId)).toEqual([e.id]);
    });
  });
});
