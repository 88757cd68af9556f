import { inboxTable, outboxTable } from '@custos/events';
import { pgSchema } from 'drizzle-orm/pg-core';

/** The Postgres schema the policy service owns; no other service reads it. */
export const SCHEMA = 'policy';
export const policySchema = pgSchema(SCHEMA);

/** Domain events waiting for the relay. */
export const outbox = outboxTable(policySchema);
/** Events this service's consumers have applied. */
export const inbox = inboxTable(policySchema);
