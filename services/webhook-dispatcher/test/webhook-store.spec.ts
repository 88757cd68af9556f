import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { createDatabase, createLogger, createPool, migrateSchema, type Database } from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { SCHEMA } from '../src/db/schema';
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
    const subs = await store.subscribers(h.orgId, 'policy.created');
    expect(subs).toHaveLength(1);
    expect(subs[0]!.id).not.toBe(h.id);
    expect(await store.subscribers(h.orgId, 'approval.created')).toHaveLength(0);
    expect(await store.subscribers(randomUUID(), 'policy.created')).toHaveLength(0);
  });

  it('never hands the same due delivery to two workers claiming at once, and a lease keeps it claimed', async () => {
    await pool.query(`UPDATE ${SCHEMA}.deliveries SET status = 'succeeded'`);
    const h = await hook();
    await store.insertDeliveries(Array.from({ length: 40 }, () => event(h.id, h.orgId)));
    const claims = await Promise.all(Array.from({ length: 8 }, () => store.claimDue(10, 60000)));
    const ids = claims.flat().map((c) => c.id);
    expect(ids).toHaveLength(40);
    expect(new Set(ids).size).toBe(40);
    expect(await store.claimDue(10, 60000)).toHaveLength(0);
    // An expired lease (a worker that died) makes the delivery claimable again.
    await pool.query(
      `UPDATE ${SCHEMA}.deliveries SET lease_until = now() - interval '1 second' WHERE id = $1`,
      [ids[0]],
    );
    expect((await store.claimDue(10, 60000)).map((c) => c.id)).toEqual([ids[0]]);
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
});
