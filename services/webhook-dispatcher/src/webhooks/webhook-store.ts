import { randomUUID } from 'node:crypto';
import { and, asc, count, desc, eq, inArray, lte, sql } from 'drizzle-orm';
import type { Database, Transaction } from '@custos/service-kit';
import { deliveries, deliveryAttempts, webhooks } from '../db/schema.js';
import type {
  DeliveryPage,
  DeliveryQuery,
  DeliveryRecord,
  WebhookInput,
  WebhookPatch,
  WebhookRecord,
} from './webhook-types.js';

type Db = Database | Transaction;

/** A delivery a worker has claimed, with what it needs to send it. */
export interface ClaimedDelivery {
  id: string;
  webhookId: string;
  eventId: string;
  eventType: string;
  body: string;
  attemptCount: number;
  url: string;
  secretSealed: string;
}

/** The outcome of one attempt, as recorded. */
export interface AttemptOutcome {
  statusCode: number | null;
  durationMs: number;
  error: string;
  /** When the attempt started. */
  attemptedAt: Date;
  /** `succeeded`, `failed` (retries used up) or `pending` with the time of the next try. */
  status: 'pending' | 'succeeded' | 'failed';
  nextAttemptAt: Date | null;
}

/** SQL of webhooks, deliveries and attempts. */
export class WebhookStore {
  constructor(private readonly db: Database) {}

  /** Runs `fn` in one transaction. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  /** Serialises webhook creation in one org until the transaction ends (so the cap holds). */
  async lockOrg(orgId: string, tx: Transaction): Promise<void> {
    await tx.execute(sql`SELECT pg_advisory_xact_lock(hashtextextended(${`webhooks:${orgId}`}, 0))`);
  }

  async countByOrg(orgId: string, tx: Db = this.db): Promise<number> {
    const [r] = await tx.select({ n: count() }).from(webhooks).where(eq(webhooks.orgId, orgId));
    return r?.n ?? 0;
  }

  async insert(
    row: WebhookInput & { id: string; orgId: string; createdBy: string; secretSealed: string },
    tx: Db = this.db,
  ): Promise<WebhookRecord> {
    const [r] = await tx.insert(webhooks).values(row).returning();
    return r!;
  }

  async listByOrg(orgId: string, tx: Db = this.db): Promise<WebhookRecord[]> {
    return tx
      .select()
      .from(webhooks)
      .where(eq(webhooks.orgId, orgId))
      .orderBy(asc(webhooks.createdAt), asc(webhooks.id));
  }

  async get(orgId: string, id: string, tx: Db = this.db): Promise<WebhookRecord | undefined> {
    const [r] = await tx
      .select()
      .from(webhooks)
      .where(and(eq(webhooks.orgId, orgId), eq(webhooks.id, id)));
    return r;
  }

  async update(
    orgId: string,
    id: string,
    patch: WebhookPatch,
    tx: Db = this.db,
  ): Promise<WebhookRecord | undefined> {
    const [r] = await tx
      .update(webhooks)
      .set({ ...patch, updatedAt: sql`now()` })
      .where(and(eq(webhooks.orgId, orgId), eq(webhooks.id, id)))
      .returning();
    return r;
  }

  async delete(orgId: string, id: string, tx: Db = this.db): Promise<WebhookRecord | undefined> {
    const [r] = await tx
      .delete(webhooks)
      .where(and(eq(webhooks.orgId, orgId), eq(webhooks.id, id)))
      .returning();
    return r;
  }

  /**
   * Active webhooks of an org subscribed to `eventType` that existed when the event happened (a
   * webhook never receives events from before it was created, even when the consumer lags).
   */
  async subscribers(
    orgId: string,
    eventType: string,
    eventAt: Date,
    tx: Db = this.db,
  ): Promise<Array<{ id: string }>> {
    return tx
      .select({ id: webhooks.id })
      .from(webhooks)
      .where(
        and(
          eq(webhooks.orgId, orgId),
          eq(webhooks.isActive, true),
          sql`${eventType} = ANY(${webhooks.events})`,
          lte(webhooks.createdAt, eventAt),
        ),
      );
  }

  /** One pending delivery per webhook; an event already delivered to a webhook adds nothing. */
  async insertDeliveries(
    rows: Array<{ webhookId: string; orgId: string; eventId: string; eventType: string; body: string }>,
    tx: Db = this.db,
  ): Promise<number> {
    if (rows.length === 0) return 0;
    const inserted = await tx
      .insert(deliveries)
      .values(rows.map((r) => ({ ...r, id: randomUUID() })))
      .onConflictDoNothing({ target: [deliveries.webhookId, deliveries.eventId] })
      .returning({ id: deliveries.id });
    return inserted.length;
  }

  /**
   * Claims up to `limit` due deliveries of active webhooks for `leaseMs`: other workers skip them
   * until the lease ends, so a worker that dies mid-send leaves them to be tried again. An org
   * gets at most `perOrg` deliveries under lease at once (counting other workers' leases), looked
   * for among the 1000 longest-due deliveries.
   */
  async claimDue(limit: number, leaseMs: number, perOrg = limit): Promise<ClaimedDelivery[]> {
    const r = await this.db.execute<{
      id: string;
      webhook_id: string;
      event_id: string;
      event_type: string;
      body: string;
      attempt_count: number;
      url: string;
      secret_sealed: string;
    }>(sql`
      WITH busy AS (
        SELECT org_id, count(*) AS n FROM ${deliveries}
        WHERE status = 'pending' AND lease_until > now() GROUP BY org_id
      ), window_ AS (
        SELECT d.id, d.org_id, d.next_attempt_at FROM ${deliveries} d JOIN ${webhooks} w ON w.id = d.webhook_id
        WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND w.is_active
          AND (d.lease_until IS NULL OR d.lease_until < now())
        ORDER BY d.next_attempt_at, d.id
        LIMIT 1000
      ), ranked AS (
        SELECT x.id, x.next_attempt_at,
          row_number() OVER (PARTITION BY x.org_id ORDER BY x.next_attempt_at, x.id) + coalesce(b.n, 0) AS slot
        FROM window_ x LEFT JOIN busy b ON b.org_id = x.org_id
      ), due AS (
        SELECT d.id FROM ${deliveries} d JOIN ranked k ON k.id = d.id
        WHERE k.slot <= ${perOrg} AND d.status = 'pending'
          AND (d.lease_until IS NULL OR d.lease_until < now())
        ORDER BY k.next_attempt_at, d.id
        LIMIT ${limit}
        FOR UPDATE OF d SKIP LOCKED
      )
      UPDATE ${deliveries} d SET lease_until = now() + make_interval(secs => ${leaseMs / 1000})
      FROM due, ${webhooks} w
      WHERE d.id = due.id AND w.id = d.webhook_id
      RETURNING d.id, d.webhook_id, d.event_id, d.event_type, d.body, d.attempt_count, w.url, w.secret_sealed`);
    return r.rows.map((x) => ({
      id: x.id,
      webhookId: x.webhook_id,
      eventId: x.event_id,
      eventType: x.event_type,
      body: x.body,
      attemptCount: Number(x.attempt_count),
      url: x.url,
      secretSealed: x.secret_sealed,
    }));
  }

  /**
   * Records attempt `attempt` of a delivery and moves it on, in one transaction. The update only
   * applies while the delivery still has `attempt - 1` tries, so an attempt is never counted twice
   * (e.g. by a worker whose lease had run out); false when another worker got there first.
   */
  async recordAttempt(deliveryId: string, attempt: number, o: AttemptOutcome): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const moved = await tx
        .update(deliveries)
        .set({
          attemptCount: attempt,
          status: o.status,
          leaseUntil: null,
          ...(o.nextAttemptAt ? { nextAttemptAt: o.nextAttemptAt } : {}),
          completedAt: o.status === 'pending' ? null : sql`now()`,
        })
        .where(
          and(
            eq(deliveries.id, deliveryId),
            eq(deliveries.attemptCount, attempt - 1),
            eq(deliveries.status, 'pending'),
          ),
        )
        .returning({ id: deliveries.id });
      if (moved.length === 0) return false;
      await tx.insert(deliveryAttempts).values({
        deliveryId,
        attempt,
        statusCode: o.statusCode,
        durationMs: o.durationMs,
        error: o.error,
        attemptedAt: o.attemptedAt,
      });
      return true;
    });
  }

  /** A webhook's deliveries, newest first, with their attempts. */
  async listDeliveries(webhookId: string, q: DeliveryQuery): Promise<DeliveryPage> {
    const where = and(
      eq(deliveries.webhookId, webhookId),
      q.status ? eq(deliveries.status, q.status) : undefined,
    );
    const [total] = await this.db.select({ n: count() }).from(deliveries).where(where);
    const rows = await this.db
      .select({
        id: deliveries.id,
        webhookId: deliveries.webhookId,
        eventId: deliveries.eventId,
        eventType: deliveries.eventType,
        status: deliveries.status,
        attemptCount: deliveries.attemptCount,
        nextAttemptAt: deliveries.nextAttemptAt,
        createdAt: deliveries.createdAt,
        completedAt: deliveries.completedAt,
      })
      .from(deliveries)
      .where(where)
      .orderBy(desc(deliveries.createdAt), desc(deliveries.id))
      .limit(q.limit)
      .offset(q.offset);
    const ids = rows.map((r) => r.id);
    const attempts = ids.length
      ? await this.db
          .select()
          .from(deliveryAttempts)
          .where(inArray(deliveryAttempts.deliveryId, ids))
          .orderBy(asc(deliveryAttempts.attempt))
      : [];
    const byDelivery = new Map<string, DeliveryRecord['attempts']>();
    for (const a of attempts) {
      const list = byDelivery.get(a.deliveryId) ?? [];
      list.push({
        attempt: a.attempt,
        statusCode: a.statusCode,
        durationMs: a.durationMs,
        error: a.error,
        attemptedAt: a.attemptedAt,
      });
      byDelivery.set(a.deliveryId, list);
    }
    return {
      deliveries: rows.map((r) => ({
        ...r,
        status: r.status as DeliveryRecord['status'],
        attempts: byDelivery.get(r.id) ?? [],
      })),
      count: total?.n ?? 0,
    };
  }

  /** Deletes finished deliveries (and their attempts) completed before `before`; returns how many. */
  async purgeFinished(before: Date, limit = 1000): Promise<number> {
    const r = await this.db.execute(sql`
      DELETE FROM ${deliveries} WHERE id IN (
        SELECT id FROM ${deliveries} WHERE completed_at IS NOT NULL AND completed_at < ${before.toISOString()}::timestamptz
        LIMIT ${limit})`);
    return r.rowCount ?? 0;
  }
}
