import type {
  Approval,
  Requirement as RequirementMessage,
  Summary,
} from '@custos/proto/custos/approvals/v1/messages';
import type { ApprovalRecord, ApprovalSummary, Requirement } from '../approvals/approval-types.js';

const iso = (d: Date | null): string => (d ? d.toISOString() : '');

/** The summary of a request; undefined when none was sent. */
export function summaryOf(s: Summary | undefined): ApprovalSummary | undefined {
  if (!s) return undefined;
  return {
    title: s.title,
    body: s.body,
    fields: s.fields.map((f) => ({ label: f.label, value: f.value })),
  };
}

/** The consensus requirement of a request; undefined when none was sent. */
export function requirementOf(r: RequirementMessage | undefined): Requirement | undefined {
  if (!r) return undefined;
  return {
    minApprovals: r.minApprovals,
    requiredRoles: [...r.requiredRoles],
    perRoleMinimums: { ...r.perRoleMinimums },
    requireCredentialTypes: [...r.requireCredentialTypes],
    selfApprovalAllowed: r.selfApprovalAllowed,
  };
}

/**
 * The approving votes (consensus); for a single approval 1 once a human approved it (a decided
 * single approval that is not `rejected` was approved: only the sweeper moves it on, to `expired`).
 */
function approvalsCount(a: ApprovalRecord): number {
  if (a.kind === 'consensus') return a.votes.filter((v) => v.decision === 'approved').length;
  return a.decidedBy !== null && a.status !== 'rejected' ? 1 : 0;
}

/**
 * An approval as a list shows it: without the payload and the preview (each up to hundreds of KiB,
 * the payload the agent's), so a list of many stays far below a gRPC message's 4 MiB; GET one
 * approval for them.
 */
export function approvalListItem(a: ApprovalRecord): Approval {
  return { ...approvalMessage(a), payload: undefined, preview: undefined };
}

/** An approval as ApprovalsService answers it. */
export function approvalMessage(a: ApprovalRecord): Approval {
  return {
    id: a.id,
    orgId: a.orgId,
    agentId: a.agentId ?? '',
    userId: a.userId ?? '',
    action: a.action,
    targetType: a.targetType,
    targetId: a.targetId,
    summary: { title: a.summary.title, body: a.summary.body, fields: a.summary.fields },
    payload: a.payload ?? undefined,
    reason: a.reason ?? '',
    declaredRiskTier: a.declaredRiskTier ?? 0,
    riskTier: a.riskTier,
    status: a.status,
    kind: a.kind,
    requirement: a.requirement
      ? {
          minApprovals: a.requirement.minApprovals,
          requiredRoles: a.requirement.requiredRoles,
          perRoleMinimums: a.requirement.perRoleMinimums,
          requireCredentialTypes: a.requirement.requireCredentialTypes,
          selfApprovalAllowed: a.requirement.selfApprovalAllowed,
        }
      : undefined,
    preview: a.preview ?? undefined,
    rule: a.rule ?? undefined,
    decisionReason: a.decisionReason ?? '',
    decidedBy: a.decidedBy ?? '',
    decidedAt: iso(a.decidedAt),
    credentialType: a.credentialType ?? '',
    expiresAt: iso(a.expiresAt),
    createdAt: iso(a.createdAt),
    executedAt: iso(a.executedAt),
    executedBy: a.executedBy ?? '',
    consumedAt: iso(a.consumedAt),
    votes: a.votes.map((v) => ({
      userId: v.userId,
      role: v.role,
      decision: v.decision,
      credentialType: v.credentialType,
      reason: v.reason ?? '',
      createdAt: v.createdAt.toISOString(),
    })),
    approvalsCount: approvalsCount(a),
  };
}
