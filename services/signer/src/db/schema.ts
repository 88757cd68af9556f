import { inboxTable, outboxTable } from '@custos/events';
import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  check,
  index,
  integer,
  pgSchema,
  text,
  timestamp,
  unique,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';

/** The Postgres schema the signer service owns; no other service reads it. */
export const SCHEMA = 'signer';
export const signerSchema = pgSchema(SCHEMA);

/** Domain events waiting for the relay. */
export const outbox = outboxTable(signerSchema);
/** Events this service's consumers have applied. */
export const inbox = inboxTable(signerSchema);

/** The chains registry (SPEC §2.5); seeded at start-up, edited by platform admins. */
export const chains = signerSchema.table(
  'chains',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    name: text('name').notNull().unique(),
    displayName: text('display_name').notNull(),
    chainId: bigint('chain_id', { mode: 'bigint' }).notNull(),
    family: text('family').notNull(),
    rpcUrl: text('rpc_url').notNull().default(''),
    wsUrl: text('ws_url').notNull().default(''),
    explorerUrl: text('explorer_url').notNull().default(''),
    nativeCurrency: text('native_currency').notNull(),
    nativeDecimals: integer('native_decimals').notNull(),
    isTestnet: boolean('is_testnet').notNull().default(false),
    isEnabled: boolean('is_enabled').notNull().default(true),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    unique('chains_family_chain_id_unique').on(t.family, t.chainId),
    check('chains_family_known', sql`${t.family} in ('evm', 'bitcoin', 'solana', 'xrp', 'cardano', 'tron')`),
  ],
);

/**
 * One version of an agent's signing key for a chain family: the public half only. The private half
 * lives in vault-crypto's `__agent-keys` vault of the org (`vault_secret_id`). At most one active
 * version per agent and family, enforced here.
 */
export const signingKeys = signerSchema.table(
  'signing_keys',
  {
    id: uuid('id').primaryKey(),
    orgId: uuid('org_id').notNull(),
    agentId: uuid('agent_id').notNull(),
    family: text('family').notNull(),
    curve: text('curve').notNull(),
    publicKey: text('public_key').notNull(),
    address: text('address').notNull(),
    keyVersion: integer('key_version').notNull(),
    custody: text('custody').notNull().default('server'),
    isActive: boolean('is_active').notNull().default(true),
    vaultSecretId: uuid('vault_secret_id').notNull(),
    createdBy: uuid('created_by').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    rotatedAt: timestamp('rotated_at', { withTimezone: true }),
  },
  (t) => [
    uniqueIndex('signing_keys_one_active')
      .on(t.agentId, t.family)
      .where(sql`${t.isActive}`),
    unique('signing_keys_agent_family_version').on(t.agentId, t.family, t.keyVersion),
    index('signing_keys_org_agent').on(t.orgId, t.agentId),
    check('signing_keys_custody_known', sql`${t.custody} in ('server', 'client_tss', 'passkey_owner')`),
  ],
);
