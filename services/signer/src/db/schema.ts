import { inboxTable, outboxTable } from '@custos/events';
import { pgSchema } from 'drizzle-orm/pg-core';

/** The Postgres schema the signer service owns; no other service reads it. */
export const SCHEMA = 'signer';
export const signerSchema = pgSchema(SCHEMA);

/** Domain events waiting for the relay. */
export const outbox = outboxTable(signerSchema);
/** Events this service's consumers have applied. */
export const inbox = inboxTable(signerSchema);
