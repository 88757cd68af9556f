import { sql } from 'drizzle-orm';
import {
  bigserial,
  index,
  jsonb,
  primaryKey,
  text,
  timestamp,
  uuid,
  type PgSchema,
} from 'drizzle-orm/pg-core';

/**
 * The transactional outbox of one service, in that service's schema. A row is written in the same
 * transaction as the change it announces; the relay publishes it and sets `published_at`.
 */
export function outboxTable(schema: PgSchema) {
  return schema.table(
    'outbox',
    {
      seq: bigserial('seq', { mode: 'number' }).primaryKey(),
      id: uuid('id').notNull().unique(),
      name: text('name').notNull(),
      orgId: text('org_id'),
      payload: jsonb('payload').notNull(),
      traceparent: text('traceparent'),
      createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
      publishedAt: timestamp('published_at', { withTimezone: true, mode: 'date' }),
    },
    (t) => [
      index('outbox_unpublished_idx')
        .on(t.seq)
        .where(sql`${t.publishedAt} IS NULL`),
    ],
  );
}

/** The inbox of one service: ids of events each consumer has applied, so each applies once. */
export function inboxTable(schema: PgSchema) {
  return schema.table(
    'inbox',
    {
      consumer: text('consumer').notNull(),
      eventId: uuid('event_id').notNull(),
      processedAt: timestamp('processed_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    },
    (t) => [primaryKey({ columns: [t.consumer, t.eventId] })],
  );
}

/** The type of a service's outbox table. */
export type OutboxTable = ReturnType<typeof outboxTable>;
/** The type of a service's inbox table. */
export type InboxTable = ReturnType<typeof inboxTable>;
