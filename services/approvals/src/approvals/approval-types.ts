/** Where an approval is in its life (SPEC §3): `executed` only for consensus approvals. */
export const APPROVAL_STATUSES = ['pending', 'approved', 'rejected', 'expired', 'executed'] as const;
/** One of APPROVAL_STATUSES. */
export type ApprovalStatus = (typeof APPROVAL_STATUSES)[number];

/** `single`: one human decides; `consensus`: M-of-N votes, then a human executes it. */
export type ApprovalKind = 'single' | 'consensus';

/** The one stored vocabulary of a decision (DECISIONS.md "Approvals"). */
export type Decision = 'approved' | 'rejected';

/** The credential a deciding human proved: none beyond the session, or the step-up method. */
export type CredentialType = 'session' | 'password' | 'totp' | 'reauth_token';

/** What the requester says the action is. */
export interface ApprovalSummary {
  title: string;
  body: string;
  fields: { label: string; value: string }[];
}

/** A consensus requirement, as stored and answered. */
export interface Requirement {
  minApprovals: number;
  requiredRoles: string[];
  perRoleMinimums: Record<string, number>;
  requireCredentialTypes: string[];
  selfApprovalAllowed: boolean;
}

/** One human's vote on a consensus approval. */
export interface VoteRecord {
  userId: string;
  role: string;
  decision: Decision;
  credentialType: string;
  reason: string | null;
  createdAt: Date;
}

/** An approval as stored, with its votes. */
export interface ApprovalRecord {
  id: string;
  orgId: string;
  agentId: string | null;
  userId: string | null;
  action: string;
  targetType: string;
  targetId: string;
  summary: ApprovalSummary;
  payload: Record<string, unknown> | null;
  reason: string | null;
  declaredRiskTier: number | null;
  riskTier: number;
  status: ApprovalStatus;
  kind: ApprovalKind;
  requirement: Requirement | null;
  preview: Record<string, unknown> | null;
  rule: Record<string, unknown> | null;
  decisionReason: string | null;
  decidedBy: string | null;
  decidedAt: Date | null;
  credentialType: string | null;
  expiresAt: Date;
  executedAt: Date | null;
  executedBy: string | null;
  consumedAt: Date | null;
  consumedBy: string | null;
  createdAt: Date;
  votes: VoteRecord[];
}

/** A new approval, checked. */
export interface NewApproval {
  orgId: string;
  agentId: string | null;
  userId: string | null;
  action: string;
  targetType: string;
  targetId: string;
  summary: ApprovalSummary;
  payload: Record<string, unknown> | null;
  reason: string | null;
  declaredRiskTier: number | null;
  riskTier: number;
  kind: ApprovalKind;
  requirement: Requirement | null;
  preview: Record<string, unknown> | null;
  rule: Record<string, unknown> | null;
  /** Seconds it stays open from its creation (the database's clock). */
  ttlSeconds: number;
}

/** What RequestApproval receives (the body of `POST /v1/approvals/request`). */
export interface RequestApprovalInput {
  action: string;
  targetType: string;
  targetId: string;
  summary: ApprovalSummary | undefined;
  payload: Record<string, unknown> | undefined;
  reason: string;
  /** 0 when absent. */
  declaredRiskTier: number;
}

/** What CreateApproval receives from signer. */
export interface CreateApprovalInput {
  orgId: string;
  agentId: string;
  agentCreatedBy: string;
  action: string;
  targetType: string;
  targetId: string;
  summary: ApprovalSummary | undefined;
  payload: Record<string, unknown> | undefined;
  preview: Record<string, unknown> | undefined;
  rule: Record<string, unknown> | undefined;
  riskTier: number;
  requirement: Requirement | undefined;
  /** 0: the configured default. */
  expirySecs: number;
}

/** What ConsumeApproval names: the approval and the use it is for. */
export interface ConsumeInput {
  approvalId: string;
  orgId: string;
  agentId: string;
  action: string;
  targetType: string;
  targetId: string;
}
