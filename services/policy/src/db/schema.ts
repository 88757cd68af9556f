import { inboxTable, outboxTable } from '@custos/events';
import { sql } from 'drizzle-orm';
import { check, index, integer, jsonb, pgSchema, text, timestamp, uuid } from 'drizzle-orm/pg-core';

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
      'grants_permissions',
      sql`cardinality(${t.permissions}) > 0 AND ${t.permissions} <@ ARRAY['read', 'write']::text[]`,
    ),
  ],
);
