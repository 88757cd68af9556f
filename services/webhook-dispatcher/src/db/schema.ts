import { inboxTable, outboxTable } from '@custos/events';
import { pgSchema } from 'drizzle-orm/pg-core';

/** The Postgres schema the webhook-dispatcher service owns; no other service reads it. */
export const SCHEMA = 'webhook_dispatcher';
export const webhookDispatcherSchema = pgSchema(SCHEMA);

/** Domain events waiting for the relay. */
export const outbox = outboxTable(webhookDispatcherSchema);
/** Events this service's consumers have applied. */
export const inbox = inboxTable(webhookDispatcherSchema);
