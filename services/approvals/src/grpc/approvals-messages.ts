import { Approval } from '@custos/proto/custos/approvals/v1/messages';
import type { Requirement as RequirementMessage, Summary } from '@custos/proto/custos/approvals/v1/messages';
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

/** The longest summary title, body, field label/value or vote reason a list item carries. */
export const LIST_TEXT_MAX = 200;
/**
 * The encoded size a list page stays under: below gRPC's 4 MiB default with room for the envelope.
 * A page that would pass it ends early (fewer items than `limit`); clients page by `limit`.
 */
export const LIST_BYTES_MAX = 3 * 1024 * 1024;

const cut = (s: string): string => (s.length > LIST_TEXT_MAX ? s.slice(0, LIST_TEXT_MAX) : s);

/**
 * An approval as a list shows it: without the payload, the preview and the rule (each up to
 * hundreds of KiB, the payload the agent's), the summary's title, body and fields and the vote
 * reasons cut to LIST_TEXT_MAX characters, so a list of many stays far below a gRPC message's
 * 4 MiB; GET one approval for the whole of it.
 */
export function approvalListItem(a: ApprovalRecord): Approval {
  const m = approvalMessage(a);
  return {
    ...m,
    summary: m.summary && {
      title: cut(m.summary.title),
      body: cut(m.summary.body),
      fields: m.summary.fields.map((f) => ({ label: cut(f.label), value: cut(f.value) })),
    },
    payload: undefined,
    preview: undefined,
    rule: undefined,
    votes: m.votes.map((v) => ({ ...v, reason: cut(v.reason) })),
  };
}

/**
 * A page of list items in order, ended early once the next item would take the encoded list past
 * LIST_BYTES_MAX (at least one item when there is any), so the answer always fits a gRPC message.
 */
export function approvalListPage(list: ApprovalRecord[]): Approval[] {
  const page: Approval[] = [];
  let bytes = 0;
  for (const a of list) {
    const item = approvalListItem(a);
    const size = Approval.encode(item).finish().length;
    // A repeated field costs its tag (1 byte) and a varint length (at most 5 bytes) per item.
    if (page.length > 0 && bytes + size + 6 > LIST_BYTES_MAX) break;
    page.push(item);
    bytes += size + 6;
  }
  return page;
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
