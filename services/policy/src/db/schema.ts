import { inboxTable, outboxTable } from '@custos/events';
import { sql } from 'drizzle-orm';
import {
  check,
  index,
  integer,
  jsonb,
  pgSchema,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';

/** The Postgres schema the policy service owns; no other service reads it. */
export const SCHEMA = 'policy';
export const policySchema = pgSchema(SCHEMA);

const tstz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/** Domain events waiting for the relay. */
export const outbox = outboxTable(policySchema);
/** Events this service's consumers have applied. */
export const inbox = inboxTable(policySchema);

/**
 * Grants (SPEC §2.3): `effect` on `permissions` of the secret paths of one vault that match
 * `secret_path_pattern`, for one principal, while `conditions` hold and until `expires_at`.
 */
export const grants = policySchema.table(
  'grants',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    orgId: uuid('org_id').notNull(),
    vaultId: uuid('vault_id').notNull(),
    secretPathPattern: text('secret_path_pattern').notNull(),
    /** `user` or `agent`. */
    principalType: text('principal_type').notNull(),
    principalId: uuid('principal_id').notNull(),
    /** A non-empty subset of `read`, `write`. */
    permissions: text('permissions').array().notNull(),
    /** `{ip_cidrs?, time_window?, environment_in?}`; `{}` when unconditional. */
    conditions: jsonb('conditions').notNull().default({}),
    /** `allow` or `deny`. */
    effect: text('effect').notNull().default('allow'),
    priority: integer('priority').notNull().default(0),
    expiresAt: tstz('expires_at'),
    /**
     * The reference's consensus_trigger (an approval rule in @custos/approval-rules' stored shape):
     * the grant's agent's matching transactions and sign intents need humans. Agent grants only.
     */
    consensusTrigger: jsonb('consensus_trigger'),
    createdBy: uuid('created_by').notNull(),
    createdAt: tstz('created_at').notNull().defaultNow(),
    updatedAt: tstz('updated_at').notNull().defaultNow(),
  },
  (t) => [
    // Decide reads exactly this: one principal's grants on one vault.
    index('grants_vault_principal').on(t.vaultId, t.principalType, t.principalId),
    // GetAgentScopes reads one agent's grants on every vault.
    index('grants_principal').on(t.principalType, t.principalId),
    check('grants_principal_type', sql`${t.principalType} IN ('user', 'agent')`),
    check('grants_effect', sql`${t.effect} IN ('allow', 'deny')`),
    check(
      'grants_consensus_trigger_agent',
      sql`${t.consensusTrigger} IS NULL OR ${t.principalType} = 'agent'`,
    ),
    check(
      'grants_permissions',
      sql`cardinality(${t.permissions}) > 0 AND ${t.permissions} <@ ARRAY['read', 'write']::text[]`,
    ),
  ],
);

/**
 * IP rules (SPEC §2.5, §7): the gateway refuses an org's requests from a client whose address
 * lies in a `block` network, and, once the org has any `allow` rule, from one in none of them.
 */
export const ipRules = policySchema.table(
  'ip_rules',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    orgId: uuid('org_id').notNull(),
    /** Normalised `address/prefix` (host bits cleared; an IPv4-mapped IPv6 network as IPv4). */
    cidr: text('cidr').notNull(),
    /** `allow` or `block`. */
    ruleType: text('rule_type').notNull(),
    description: text('description').notNull().default(''),
    createdBy: uuid('created_by').notNull(),
    /** `user` or `agent`. */
    createdByType: text('created_by_type').notNull(),
    createdAt: tstz('created_at').notNull().defaultNow(),
  },
  (t) => [
    // The gateway reads one org's rules; the same network twice with the same type is a 409.
    uniqueIndex('ip_rules_org_cidr_type').on(t.orgId, t.cidr, t.ruleType),
    check('ip_rules_rule_type', sql`${t.ruleType} IN ('allow', 'block')`),
    check('ip_rules_created_by_type', sql`${t.createdByType} IN ('user', 'agent')`),
  ],
);
