import { inboxTable, outboxTable } from '@custos/events';
import { pgSchema } from 'drizzle-orm/pg-core';

/** The Postgres schema the approvals service owns; no other service reads it. */
export const SCHEMA = 'approvals';
export const approvalsSchema = pgSchema(SCHEMA);

/** Domain events waiting for the relay. */
export const outbox = outboxTable(approvalsSchema);
/** Events this service's consumers have applied. */
export const inbox = inboxTable(approvalsSchema);
