import { inboxTable, outboxTable } from '@custos/events';
import { sql } from 'drizzle-orm';
import {
  boolean,
  check,
  index,
  integer,
  pgSchema,
  primaryKey,
  text,
  timestamp,
  unique,
  uuid,
} from 'drizzle-orm/pg-core';

/** The Postgres schema the webhook-dispatcher service owns; no other service reads it. */
export const SCHEMA = 'webhook_dispatcher';
export const webhookDispatcherSchema = pgSchema(SCHEMA);

/** Domain events waiting for the relay. */
export const outbox = outboxTable(webhookDispatcherSchema);
/** Events this service's consumers have applied. */
export const inbox = inboxTable(webhookDispatcherSchema);

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date', precision: 3 });

/** An org's registered destinations. The signing secret is stored sealed (AES-256-GCM), never in clear. */
export const webhooks = webhookDispatcherSchema.table(
  'webhooks',
  {
    id: uuid('id').primaryKey(),
    orgId: uuid('org_id').notNull(),
    url: text('url').notNull(),
    /** Subscribed event names, sorted and unique. */
    events: text('events').array().notNull(),
    description: text('description').notNull().default(''),
    isActive: boolean('is_active').notNull().default(true),
    /** `v1.<iv>.<tag>.<ciphertext>` (base64url), sealed under WEBHOOK_SECRET_KEY with the id as AAD. */
    secretSealed: text('secret_sealed').notNull(),
    createdBy: uuid('created_by').notNull(),
    createdAt: ts('created_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [index('webhooks_org_idx').on(t.orgId, t.createdAt)],
);

/**
 * One event on its way to one webhook. `body` is the exact JSON sent on every attempt, so the
 * signature and the bytes a receiver sees never change between retries. A delivery is claimed by a
 * worker through `lease_until`; the (webhook, event) pair is unique, so an event redelivered by
 * JetStream can never make a second delivery.
 */
export const deliveries = webhookDispatcherSchema.table(
  'deliveries',
  {
    id: uuid('id').primaryKey(),
    webhookId: uuid('webhook_id')
      .notNull()
      .references(() => webhooks.id, { onDelete: 'cascade' }),
    orgId: uuid('org_id').notNull(),
    eventId: uuid('event_id').notNull(),
    eventType: text('event_type').notNull(),
    body: text('body').notNull(),
    status: text('status').notNull().default('pending'),
    attemptCount: integer('attempt_count').notNull().default(0),
    nextAttemptAt: ts('next_attempt_at').notNull().defaultNow(),
    leaseUntil: ts('lease_until'),
    createdAt: ts('created_at').notNull().defaultNow(),
    completedAt: ts('completed_at'),
  },
  (t) => [
    unique('deliveries_webhook_event_key').on(t.webhookId, t.eventId),
    index('deliveries_due_idx')
      .on(t.nextAttemptAt)
      .where(sql`${t.status} = 'pending'`),
    index('deliveries_webhook_created_idx').on(t.webhookId, t.createdAt),
    index('deliveries_completed_idx')
      .on(t.completedAt)
      .where(sql`${t.completedAt} IS NOT NULL`),
    check('deliveries_status_check', sql`${t.status} IN ('pending', 'succeeded', 'failed')`),
  ],
);

/** Every try at a delivery; (delivery, attempt) is unique, so no try is recorded twice. */
export const deliveryAttempts = webhookDispatcherSchema.table(
  'delivery_attempts',
  {
    deliveryId: uuid('delivery_id')
      .notNull()
      .references(() => deliveries.id, { onDelete: 'cascade' }),
    attempt: integer('attempt').notNull(),
    statusCode: integer('status_code'),
    durationMs: integer('duration_ms').notNull(),
    error: text('error').notNull().default(''),
    attemptedAt: ts('attempted_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.deliveryId, t.attempt] })],
);
