import { inboxTable, outboxTable } from '@custos/events';
import { pgSchema } from 'drizzle-orm/pg-core';

/** The Postgres schema the billing service owns; no other service reads it. */
export const SCHEMA = 'billing';
export const billingSchema = pgSchema(SCHEMA);

/** Domain events waiting for the relay. */
export const outbox = outboxTable(billingSchema);
/** Events this service's consumers have applied. */
export const inbox = inboxTable(billingSchema);
