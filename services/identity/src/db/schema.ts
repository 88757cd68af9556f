import { inboxTable, outboxTable } from '@custos/events';
import { pgSchema } from 'drizzle-orm/pg-core';

/** The Postgres schema the identity service owns; no other service reads it. */
export const SCHEMA = 'identity';
export const identitySchema = pgSchema(SCHEMA);

/** Domain events waiting for the relay. */
export const outbox = outboxTable(identitySchema);
/** Events this service's consumers have applied. */
export const inbox = inboxTable(identitySchema);
