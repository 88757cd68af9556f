import { inboxTable, outboxTable } from '@custos/events';
import { pgSchema } from 'drizzle-orm/pg-core';

/** The Postgres schema the audit service owns; no other service reads it. */
export const SCHEMA = 'audit';
export const auditSchema = pgSchema(SCHEMA);

/** Domain events waiting for the relay. */
export const outbox = outboxTable(auditSchema);
/** Events this service's consumers have applied. */
export const inbox = inboxTable(auditSchema);
