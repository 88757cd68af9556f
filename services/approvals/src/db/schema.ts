import { inboxTable, outboxTable } from '@custos/events';
import { sql } from 'drizzle-orm';
import {
  check,
  index,
  integer,
  jsonb,
  pgSchema,
  primaryKey,
  text,
  timestamp,
  uuid,
} from 'drizzle-orm/pg-core';

/** The Postgres schema the approvals service owns; no other service reads it. */
export const SCHEMA = 'approvals';
export const approvalsSchema = pgSchema(SCHEMA);

const tstz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/** Domain events waiting for the relay. */
export const outbox = outboxTable(approvalsSchema);
/** Events this service's consumers have applied. */
export const inbox = inboxTable(approvalsSchema);

/**
 * Approval requests (SPEC §2.5, §3, §4.5): an agent's own request or a platform-created one (a
 * transaction or a sign intent waiting for a human), its decision, and its single use. Every change
 * of `status` is a conditional UPDATE on the status it leaves, so two concurrent decisions can
 * never both win, and `consumed_at` is set once by one conditional UPDATE.
 */
export const approvals = approvalsSchema.table(
  'approvals',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    orgId: uuid('org_id').notNull(),
    /** The agent it concerns; null for none. */
    agentId: uuid('agent_id'),
    /** The human responsible for the requester (the agent's creator); null when unknown. */
    userId: uuid('user_id'),
    action: text('action').notNull(),
    targetType: text('target_type').notNull(),
    targetId: text('target_id').notNull(),
    /** `{title, body, fields: [{label, value}]}`: the requester's words. */
    summary: jsonb('summary').notNull(),
    /** The requester's payload (free-form JSON object); null when none. */
    payload: jsonb('payload'),
    reason: text('reason'),
    /** The tier the requester declared (1-3); null when none. */
    declaredRiskTier: integer('declared_risk_tier'),
    /** The enforced tier (1-3). */
    riskTier: integer('risk_tier').notNull(),
    /** `pending`, `approved`, `rejected`, `expired`, `executed`. */
    status: text('status').notNull().default('pending'),
    /** `single` or `consensus`. */
    kind: text('kind').notNull().default('single'),
    /**
     * Consensus: `{min_approvals, required_roles, per_role_minimums, require_credential_types,
     * self_approval_allowed}`; null for `single`.
     */
    requirement: jsonb('requirement'),
    /** What the server computed for the approver (agent_transaction); null when none. */
    preview: jsonb('preview'),
    /** The rule of the agent's policy that asked for it; null when none matched. */
    rule: jsonb('rule'),
    decisionReason: text('decision_reason'),
    decidedBy: uuid('decided_by'),
    decidedAt: tstz('decided_at'),
    /** The credential the deciding human proved: `session`, `password`, `totp`, `reauth_token`. */
    credentialType: text('credential_type'),
    /** Deciding and using both end here. */
    expiresAt: tstz('expires_at').notNull(),
    executedAt: tstz('executed_at'),
    executedBy: uuid('executed_by'),
    consumedAt: tstz('consumed_at'),
    /** What used it: `<target_type>:<target_id>`. */
    consumedBy: text('consumed_by'),
    createdAt: tstz('created_at').notNull().defaultNow(),
  },
  (t) => [
    // ListApprovals: an org's approvals by status, newest first.
    index('approvals_org_status_created').on(t.orgId, t.status, t.createdAt),
    // GetApproval of an agent, ListApprovals filtered by agent.
    index('approvals_org_agent_created').on(t.orgId, t.agentId, t.createdAt),
    // The expiry sweeper: open approvals by the time they end.
    index('approvals_open_expires')
      .on(t.expiresAt)
      .where(sql`${t.status} in ('pending', 'approved', 'executed') and ${t.consumedAt} is null`),
    check(
      'approvals_status_known',
      sql`${t.status} in ('pending', 'approved', 'rejected', 'expired', 'executed')`,
    ),
    check('approvals_kind_known', sql`${t.kind} in ('single', 'consensus')`),
    check('approvals_risk_tier_range', sql`${t.riskTier} between 1 and 3`),
    check(
      'approvals_declared_tier_range',
      sql`${t.declaredRiskTier} is null or ${t.declaredRiskTier} between 1 and 3`,
    ),
    check(
      'approvals_consensus_has_requirement',
      sql`(${t.kind} = 'consensus') = (${t.requirement} is not null)`,
    ),
    check('approvals_executed_is_consensus', sql`${t.status} <> 'executed' or ${t.kind} = 'consensus'`),
  ],
);

/**
 * The votes of consensus approvals: one per human (a second vote by the same human is a unique
 * violation, answered 409).
 */
export const approvalVotes = approvalsSchema.table(
  'approval_votes',
  {
    approvalId: uuid('approval_id')
      .notNull()
      .references(() => approvals.id, { onDelete: 'cascade' }),
    userId: uuid('user_id').notNull(),
    /** The voter's role in the org when voting. */
    role: text('role').notNull(),
    /** `approved` or `rejected`. */
    decision: text('decision').notNull(),
    credentialType: text('credential_type').notNull(),
    reason: text('reason'),
    createdAt: tstz('created_at').notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ name: 'approval_votes_pk', columns: [t.approvalId, t.userId] }),
    check('approval_votes_decision_known', sql`${t.decision} in ('approved', 'rejected')`),
  ],
);
