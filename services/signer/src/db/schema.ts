import { inboxTable, outboxTable } from '@custos/events';
import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  check,
  customType,
  index,
  integer,
  jsonb,
  numeric,
  pgSchema,
  primaryKey,
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

/** Transaction states (reference TransactionResponse plus `confirmed` and `failed` after the receipt). */
export const TX_STATUSES = [
  'pending',
  'signed',
  'sign_only',
  'broadcast',
  'confirmed',
  'failed',
  'simulation_failed',
] as const;

/**
 * An agent's transaction on an EVM chain, from its creation to its receipt. Amounts in wei as
 * numeric(78). `nonce_held`: the row holds its nonce (at most one row per key, chain and nonce;
 * a transaction that never reached the node gives its nonce back and stops holding it).
 */
export const transactions = signerSchema.table(
  'transactions',
  {
    id: uuid('id').primaryKey(),
    orgId: uuid('org_id').notNull(),
    agentId: uuid('agent_id').notNull(),
    keyId: uuid('key_id').notNull(),
    chainName: text('chain_name').notNull(),
    chainId: bigint('chain_id', { mode: 'bigint' }).notNull(),
    fromAddress: text('from_address').notNull(),
    toAddress: text('to_address'),
    valueWei: numeric('value_wei', { precision: 78, scale: 0 }).notNull(),
    data: text('data').notNull().default('0x'),
    nonce: bigint('nonce', { mode: 'number' }),
    nonceHeld: boolean('nonce_held').notNull().default(false),
    gasLimit: numeric('gas_limit', { precision: 78, scale: 0 }),
    txType: integer('tx_type').notNull(),
    maxFeePerGas: numeric('max_fee_per_gas', { precision: 78, scale: 0 }),
    maxPriorityFeePerGas: numeric('max_priority_fee_per_gas', { precision: 78, scale: 0 }),
    gasPrice: numeric('gas_price', { precision: 78, scale: 0 }),
    status: text('status').notNull(),
    txHash: text('tx_hash'),
    signedTx: text('signed_tx'),
    errorMessage: text('error_message'),
    blockNumber: bigint('block_number', { mode: 'bigint' }),
    gasUsed: numeric('gas_used', { precision: 78, scale: 0 }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    signedAt: timestamp('signed_at', { withTimezone: true }),
    broadcastAt: timestamp('broadcast_at', { withTimezone: true }),
    /**
     * Set just before the signed bytes are first given to the node: a `signed` row without it was
     * never sent (its request stopped before), so recovery gives its nonce back rather than send it.
     */
    sendAttemptedAt: timestamp('send_attempted_at', { withTimezone: true }),
    confirmedAt: timestamp('confirmed_at', { withTimezone: true }),
    /** When the receipt watcher may look at the row next (its lease and back-off). */
    watchAfter: timestamp('watch_after', { withTimezone: true }),
    /**
     * The chain's head when the watcher first found this broadcast transaction's nonce passed with
     * no receipt and the node not knowing it; it is concluded dropped only if still so some blocks
     * later (a load-balanced endpoint's backends may disagree for a moment). For a non-EVM
     * transfer: when (epoch ms) the watcher first found it expired (concluded only if it still is a
     * while later).
     */
    dropSeenBlock: bigint('drop_seen_block', { mode: 'bigint' }),
    /**
     * Non-EVM: the most the transfer pays in fees (native base unit); after confirmation, what the
     * chain reports. EVM keeps its gas fields.
     */
    fee: numeric('fee', { precision: 78, scale: 0 }),
    /** The chain's family when the transaction was made (`evm`, `bitcoin` …): which path follows it. */
    family: text('family').notNull().default('evm'),
    /** Non-EVM: the request's chain fields and the adapter's facts (memo, token, fee rate …), no secret. */
    details: jsonb('details').$type<Record<string, string>>().notNull().default({}),
    /** Non-EVM: until when the chain may include it (`block_height`, `ledger`, `slot`, `time_ms`). */
    expiryKind: text('expiry_kind'),
    expiryValue: numeric('expiry_value', { precision: 78, scale: 0 }),
    /**
     * The approval (approvals service) a transaction `awaiting_approval` waits for, kept once the
     * resume consumed it and the row went on.
     */
    approvalId: uuid('approval_id'),
    /**
     * The canonical hash of the submission body without `resume_tx_id` (as an Idempotency-Key's):
     * a resume must send the same body as the held transaction.
     */
    requestHash: text('request_hash'),
    /**
     * When a transaction `awaiting_approval` was resumed (its approval consumed, a nonce taken): the
     * recovery scan measures a resumed row's age from here, not from `created_at`.
     */
    resumedAt: timestamp('resumed_at', { withTimezone: true }),
  },
  (t) => [
    index('transactions_agent_created').on(t.agentId, t.createdAt.desc(), t.id.desc()),
    uniqueIndex('transactions_nonce_held')
      .on(t.keyId, t.chainId, t.nonce)
      .where(sql`${t.nonceHeld}`),
    index('transactions_watch')
      .on(t.watchAfter)
      .where(sql`${t.status} = 'broadcast'`),
    // The watcher's recovery scan (leaseStale): rows left pending or signed, oldest first.
    index('transactions_unfinished')
      .on(t.status, t.createdAt)
      .where(sql`${t.status} in ('pending', 'signed')`),
    check(
      'transactions_status_known',
      sql`${t.status} in ('awaiting_approval', 'pending', 'signed', 'sign_only', 'broadcast', 'confirmed', 'failed', 'simulation_failed')`,
    ),
    check('transactions_nonce_held_has_nonce', sql`not ${t.nonceHeld} or ${t.nonce} is not null`),
    check(
      'transactions_awaiting_has_no_nonce',
      sql`${t.status} <> 'awaiting_approval' or (${t.nonce} is null and not ${t.nonceHeld})`,
    ),
  ],
);

/**
 * The inputs (UTXO chains: `txid:vout`) a transaction of a key spends: one transaction per input
 * and chain, decided by the primary key, so two parallel transfers never spend one output. Freed
 * when the transaction fails or expires; kept once it is on chain (the output is spent for good).
 */
export const txInputs = signerSchema.table(
  'tx_inputs',
  {
    chainName: text('chain_name').notNull(),
    inputRef: text('input_ref').notNull(),
    keyId: uuid('key_id').notNull(),
    txId: uuid('tx_id')
      .notNull()
      .references(() => transactions.id),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.chainName, t.inputRef] }),
    index('tx_inputs_key').on(t.keyId, t.chainName),
    index('tx_inputs_tx').on(t.txId),
  ],
);

/** The next nonce signer gives out per signing key and chain (reconciled upward with the chain). */
export const nonces = signerSchema.table(
  'nonces',
  {
    keyId: uuid('key_id').notNull(),
    chainId: bigint('chain_id', { mode: 'bigint' }).notNull(),
    nextNonce: bigint('next_nonce', { mode: 'number' }).notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.keyId, t.chainId] })],
);

/** Nonces given out for transactions that never reached the node: the next allocations take them first. */
export const releasedNonces = signerSchema.table(
  'released_nonces',
  {
    keyId: uuid('key_id').notNull(),
    chainId: bigint('chain_id', { mode: 'bigint' }).notNull(),
    nonce: bigint('nonce', { mode: 'number' }).notNull(),
    releasedAt: timestamp('released_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.keyId, t.chainId, t.nonce] })],
);

/**
 * Idempotency-Key claims of transaction submissions (DECISIONS.md: 24 h per principal and route):
 * one per agent and key, with the hash of the request it was first used with and, once made, the
 * transaction it answers with.
 */
export const txIdempotency = signerSchema.table(
  'tx_idempotency',
  {
    agentId: uuid('agent_id').notNull(),
    idempotencyKey: text('idempotency_key').notNull(),
    requestHash: text('request_hash').notNull(),
    txId: uuid('tx_id'),
    /**
     * Which request holds the claim (a new one on each claim or takeover): only that request may
     * give it back or link its transaction to it.
     */
    claimId: uuid('claim_id').notNull().defaultRandom(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('tx_idempotency_agent_key').on(t.agentId, t.idempotencyKey)],
);

/** Raw bytes (a client share's ciphertext). */
const bytea = customType<{ data: Buffer; driverData: Buffer }>({ dataType: () => 'bytea' });

/**
 * The wraps of the user's share of a `client_tss` key (SPEC §2.8), as the user's device sent them:
 * ciphertext and the parameters needed to unwrap it, never opened here. One wrap per type and key
 * (`passkey_prf`, `recovery_code`); the key is ready for value once both exist.
 */
export const clientShareWraps = signerSchema.table(
  'client_share_wraps',
  {
    keyId: uuid('key_id')
      .notNull()
      .references(() => signingKeys.id),
    orgId: uuid('org_id').notNull(),
    type: text('type').notNull(),
    ciphertext: bytea('ciphertext').notNull(),
    /** What the device needs to unwrap: algorithm, nonce, credential id, salt, kdf (JSON, no secret). */
    params: jsonb('params').notNull(),
    createdBy: uuid('created_by').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.keyId, t.type] }),
    index('client_share_wraps_org').on(t.orgId),
    check('client_share_wraps_type_known', sql`${t.type} in ('passkey_prf', 'recovery_code')`),
    check('client_share_wraps_ciphertext_size', sql`octet_length(${t.ciphertext}) between 16 and 4096`),
  ],
);

/**
 * The agents' guardrail running totals (issue 20): per agent, chain and UTC day, the native value,
 * the gas budget (Σ gas_limit × max_fee_per_gas) and the count of the transactions accepted. A
 * request reserves its amounts under the row's lock in the transaction that judges it, so parallel
 * requests cannot pass a cap together; a transaction that ends `failed` before broadcast gives its
 * reservation back (guardrailReservations).
 */
export const guardrailLedger = signerSchema.table(
  'guardrail_ledger',
  {
    agentId: uuid('agent_id').notNull(),
    orgId: uuid('org_id').notNull(),
    chainName: text('chain_name').notNull(),
    family: text('family').notNull(),
    /** The UTC calendar day (YYYY-MM-DD). */
    day: text('day').notNull(),
    /** Native value, in the chain's smallest unit. */
    valueSpent: numeric('value_spent', { precision: 78, scale: 0 }).notNull().default('0'),
    /** Gas budget used, in the chain's smallest unit. */
    gasSpent: numeric('gas_spent', { precision: 78, scale: 0 }).notNull().default('0'),
    txCount: integer('tx_count').notNull().default(0),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.agentId, t.chainName, t.day] }),
    index('guardrail_ledger_agent_day').on(t.agentId, t.day),
    check(
      'guardrail_ledger_non_negative',
      sql`${t.valueSpent} >= 0 and ${t.gasSpent} >= 0 and ${t.txCount} >= 0`,
    ),
    check('guardrail_ledger_day_format', sql`${t.day} ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}$'`),
  ],
);

/** One request's reservation on the guardrail ledger, so that it can be given back exactly once. */
export const guardrailReservations = signerSchema.table(
  'guardrail_reservations',
  {
    id: uuid('id').primaryKey(),
    agentId: uuid('agent_id').notNull(),
    chainName: text('chain_name').notNull(),
    day: text('day').notNull(),
    value: numeric('value', { precision: 78, scale: 0 }).notNull(),
    gas: numeric('gas', { precision: 78, scale: 0 }).notNull(),
    /** `transaction` (submitted; released when it fails before broadcast) or `sign_only` (never released). */
    kind: text('kind').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    releasedAt: timestamp('released_at', { withTimezone: true }),
  },
  (t) => [
    index('guardrail_reservations_agent_day').on(t.agentId, t.day),
    check('guardrail_reservations_kind_known', sql`${t.kind} in ('transaction', 'sign_only')`),
  ],
);
