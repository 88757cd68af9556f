import { inboxTable, outboxTable } from '@custos/events';
import type { TablePrivilege } from '@custos/service-kit';
import { sql } from 'drizzle-orm';
import { bigint, index, integer, jsonb, pgSchema, text, timestamp, unique, uuid } from 'drizzle-orm/pg-core';

/** The Postgres schema the audit service owns; no other service reads it. */
export const SCHEMA = 'audit';
export const auditSchema = pgSchema(SCHEMA);
/**
 * What the service's own role may do beyond the default read/write (src/migrate.ts): read and
 * append records, never change them; move the chain heads forward, never delete them.
 */
export const AUDIT_TABLE_PRIVILEGES = {
  events: ['SELECT', 'INSERT'],
  chain_heads: ['SELECT', 'INSERT', 'UPDATE'],
  checkpoints: ['SELECT', 'INSERT'],
} as const satisfies Record<string, readonly TablePrivilege[]>;

/** Domain events waiting for the relay. */
export const outbox = outboxTable(auditSchema);
/** Events this service's consumers have applied. */
export const inbox = inboxTable(auditSchema);

/**
 * The audit records, chained per org (DECISIONS.md: audit). Append-only: the service's role may only
 * insert and select here, and a trigger refuses UPDATE, DELETE and TRUNCATE for anyone.
 * `id` is the id of the `audit.recorded` event that carried the record.
 */
export const auditEvents = auditSchema.table(
  'events',
  {
    id: uuid('id').primaryKey(),
    orgId: uuid('org_id').notNull(),
    /** Position in the org's chain, from 1, without gaps. */
    seq: bigint('seq', { mode: 'number' }).notNull(),
    actorType: text('actor_type').notNull(),
    actorId: text('actor_id'),
    action: text('action').notNull(),
    resourceType: text('resource_type').notNull(),
    resourceId: text('resource_id'),
    /** The record's facts, with `ip_address` and `request_id` folded in so the HMAC covers them. */
    metadata: jsonb('metadata').notNull(),
    /** When the action happened (the acting service's clock). */
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date', precision: 3 }).notNull(),
    /** When the audit service chained it. */
    recordedAt: timestamp('recorded_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    prevHash: text('prev_hash').notNull(),
    integrityHash: text('integrity_hash').notNull(),
    /**
     * The service that produced the record: the one whose NATS subject it arrived on
     * (`audit.recorded.<service>`, pinned by NATS permissions), or `audit` for a record audit made
     * itself (RecordEvent). Null for records chained before it was stored. Not covered by the HMAC.
     */
    producer: text('producer'),
    /**
     * The version of the HMAC key that chained the record (AUDIT_HMAC_KEY is version 1), so the key
     * can rotate: a verifier picks the key by this number. Records chained before it was stored are 1.
     */
    keyVersion: integer('key_version').notNull().default(1),
  },
  (t) => [
    unique('events_org_seq_key').on(t.orgId, t.seq),
    index('events_org_action_seq_idx').on(t.orgId, t.action, t.seq),
  ],
);

/** The end of each org's chain: the last sequence number and hash, locked by each append. */
export const chainHeads = auditSchema.table('chain_heads', {
  orgId: uuid('org_id').primaryKey(),
  seq: bigint('seq', { mode: 'number' }).notNull(),
  hash: text('hash').notNull(),
  updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' })
    .notNull()
    .default(sql`now()`),
});

/**
 * Signed checkpoints of org chain heads (docs/security.md: audit checkpoints): the position and
 * hash of an org's head at a moment, signed with Ed25519 (AUDIT_CHECKPOINT_SIGNING_KEY), so that
 * records removed from the end and a head rewound to match are caught by anyone holding an earlier
 * checkpoint and the public key. Append-only like the records.
 */
export const checkpoints = auditSchema.table(
  'checkpoints',
  {
    id: uuid('id').primaryKey(),
    orgId: uuid('org_id').notNull(),
    /** The head's position (the last record's seq). */
    seq: bigint('seq', { mode: 'number' }).notNull(),
    /** The head's hash: the integrity_hash of the record at `seq`. */
    headHash: text('head_hash').notNull(),
    /** When it was signed (part of the signed message). */
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date', precision: 3 }).notNull(),
    /** Which signing key: the first 16 hex digits of SHA-256 of the raw Ed25519 public key. */
    keyId: text('key_id').notNull(),
    /** Base64 Ed25519 signature over the checkpoint's canonical message. */
    signature: text('signature').notNull(),
  },
  (t) => [unique('checkpoints_org_seq_key').on(t.orgId, t.seq)],
);
