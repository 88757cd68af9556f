import type { UserPrincipal } from '@custos/auth';
import { type AuditRecordInput, auditOf, writeAudit } from '@custos/events';
import type { Transaction } from '@custos/service-kit';
import type { ApprovalRecord } from '../approvals/approval-types.js';
import type { Tally } from '../approvals/approval-fns.js';
import { outbox } from '../db/schema.js';

/**
 * Writes one of approvals' audit records into the transaction of the change it describes: it
 * travels through this service's outbox, so the change commits only with its record (fail-closed).
 */
export function writeApprovalsAudit(tx: Transaction, record: AuditRecordInput): Promise<string> {
  return writeAudit(tx, outbox, record);
}

const resourceOf = (a: ApprovalRecord) => ({ type: 'approval', id: a.id });

/** What every record of an approval says about it (never its payload). */
function basics(a: ApprovalRecord): Record<string, unknown> {
  return {
    action: a.action,
    target_type: a.targetType,
  };
}

/**
 * `approval.requested`: an agent asked (RequestApproval) or the platform raised one for an
 * agent's action (CreateApproval); the agent is the actor either way.
 */
export function requestedAudit(a: ApprovalRecord, platformCreated: boolean): AuditRecordInput {
  return {
    orgId: a.orgId,
    // A human's guardrail change is requested by that human (userId); other approvals by the agent.
    ...(a.action === 'policy_change' && a.userId
      ? { actorType: 'user' as const, actorId: a.userId }
      : { actorType: a.agentId ? ('agent' as const) : ('system' as const), actorId: a.agentId }),
    action: 'approval.requested',
    resourceType: 'approval',
    resourceId: a.id,
    metadata: {
      ...basics(a),
      target_id: a.targetId,
      risk_tier: a.riskTier,
      declared_risk_tier: a.declaredRiskTier,
      kind: a.kind,
      platform_created: platformCreated,
      expires_at: a.expiresAt.toISOString(),
    },
  };
}

/** `approval.decided`: a human's decision, or vote with the counts so far (consensus). */
export function decidedAudit(
  caller: UserPrincipal,
  a: ApprovalRecord,
  d: { decision: string; credentialType: string; tally?: Tally },
): AuditRecordInput {
  return auditOf(caller, 'approval.decided', resourceOf(a), {
    ...basics(a),
    decision: d.decision,
    credential_type: d.credentialType,
    risk_tier: a.riskTier,
    kind: a.kind,
    status: a.status,
    ...(d.tally
      ? {
          approvals: d.tally.approvals,
          rejections: d.tally.rejections,
          min_approvals: a.requirement?.minApprovals ?? 1,
        }
      : {}),
  });
}

/** `approval.executed`: a human executed an approved consensus approval. */
export function executedAudit(caller: UserPrincipal, a: ApprovalRecord): AuditRecordInput {
  return auditOf(caller, 'approval.executed', resourceOf(a), { ...basics(a), risk_tier: a.riskTier });
}

/** `approval.consumed`: the agent's resume used it, by the target it names. */
export function consumedAudit(a: ApprovalRecord): AuditRecordInput {
  return {
    orgId: a.orgId,
    actorType: a.agentId ? 'agent' : 'system',
    actorId: a.agentId,
    action: 'approval.consumed',
    resourceType: 'approval',
    resourceId: a.id,
    metadata: { ...basics(a), target_id: a.targetId, by: a.consumedBy, kind: a.kind },
  };
}

/** `approval.expired`: the sweeper ended it (nobody acted). */
export function expiredAudit(a: ApprovalRecord, statusBefore: string): AuditRecordInput {
  return {
    orgId: a.orgId,
    actorType: 'system',
    actorId: null,
    action: 'approval.expired',
    resourceType: 'approval',
    resourceId: a.id,
    metadata: { ...basics(a), kind: a.kind, status_before: statusBefore },
  };
}
