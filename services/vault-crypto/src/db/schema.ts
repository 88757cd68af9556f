import { inboxTable, outboxTable } from '@custos/events';
import { pgSchema } from 'drizzle-orm/pg-core';

/** The Postgres schema the vault-crypto service owns; no other service reads it. */
export const SCHEMA = 'vault_crypto';
export const vaultCryptoSchema = pgSchema(SCHEMA);

/** Domain events waiting for the relay. */
export const outbox = outboxTable(vaultCryptoSchema);
/** Events this service's consumers have applied. */
export const inbox = inboxTable(vaultCryptoSchema);
