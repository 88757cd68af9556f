import { z } from 'zod/v4';
import type { Approval, Summary } from '@custos/proto/custos/approvals/v1/messages';
import { dateTime } from './schemas.js';

// Approvals as HTTP shows them (issue 19; the reference's ApprovalResponse and more), and the
// `summary` an agent gives for an approver, shared by approval requests, transactions and sign
// intents.

/** What the requester says the action is: a title, a body and labelled fields. */
export const SummarySchema = z
  .strictObject({
    title: z
      .string()
      .max(200)
      .refine((v) => v.trim() !== '', 'is required (not blank)'),
    body: z.string().max(4000).optional(),
    fields: z
      .array(
        z.strictObject({
          label: z
            .string()
            .max(100)
            .refine((v) => v.trim() !== '', 'is required (not blank)'),
          value: z.string().max(1000),
        }),
      )
      .max(50)
      .optional(),
  })
  .describe("The requester's own words for the approver: title (required), body, labelled fields");

/** A summary of a body as the proto carries it. */
export function summaryMessage(s: z.output<typeof SummarySchema>): Summary {
  return { title: s.title, body: s.body ?? '', fields: s.fields ?? [] };
}

/** The largest `payload` taken, in bytes of UTF-8 JSON text (as the approvals service counts). */
export const PAYLOAD_MAX_BYTES = 65_536;

/** A free-form JSON object of at most PAYLOAD_MAX_BYTES bytes of JSON text. */
export const PayloadSchema = z
  .record(z.string(), z.unknown(), { error: 'must be a JSON object' })
  .refine((v) => Buffer.byteLength(JSON.stringify(v), 'utf8') <= PAYLOAD_MAX_BYTES, {
    message: `must be a JSON object of at most ${PAYLOAD_MAX_BYTES} bytes of JSON`,
  });

/** The decisions `POST /v1/approvals/{id}/decide` takes (stored as `approved` or `rejected`). */
export const DECISIONS = ['approve', 'approved', 'reject', 'rejected', 'denied'] as const;

/** Actions only the platform raises: an agent's request naming one is 400 naming `action`. */
export const PLATFORM_ACTIONS = [
  'policy_change',
  'card_order',
  'agent_transaction',
  'agent_execution',
  'agent_sign_intent',
] as const;

/** The control-plane actions an agent may request. */
export const CONTROL_PLANE_ACTIONS = ['access_request', 'policy_request', 'binding_request'] as const;

const BUSINESS_ACTION = /^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$/;

/** An agent's requested action: a control-plane action or a business `namespace.verb`, ≤ 64 chars. */
export const ActionSchema = z
  .string()
  .max(64)
  .superRefine((v, ctx) => {
    if ((PLATFORM_ACTIONS as readonly string[]).includes(v)) {
      ctx.addIssue({
        code: 'custom',
        message: `${v} is raised by the platform only and cannot be requested`,
      });
    } else if (!(CONTROL_PLANE_ACTIONS as readonly string[]).includes(v) && !BUSINESS_ACTION.test(v)) {
      ctx.addIssue({
        code: 'custom',
        message: `must be ${CONTROL_PLANE_ACTIONS.join(', ')} or a business action namespace.verb`,
      });
    }
  })
  .describe(
    '`access_request`, `policy_request`, `binding_request` or a business `namespace.verb` (at most 64 characters); platform-created actions are refused',
  );

const ApprovalStatus = z.enum(['pending', 'approved', 'rejected', 'expired', 'executed']);

/** An approval as HTTP shows it (the reference's ApprovalResponse, the consensus fields and more). */
export const ApprovalResponse = z.object({
  id: z.string(),
  approval_id: z.string().describe('The same as id'),
  org_id: z.string(),
  user_id: z.string().nullable().describe("The human responsible for the requester (the agent's creator)"),
  agent_id: z.string().nullable(),
  action: z.string(),
  target_type: z.string(),
  target_id: z.string(),
  summary: z.object({
    title: z.string(),
    body: z.string().nullable(),
    fields: z.array(z.object({ label: z.string(), value: z.string() })),
  }),
  payload: z.record(z.string(), z.unknown()).nullable(),
  reason: z.string().nullable(),
  declared_risk_tier: z.number().int().nullable().describe('The tier the requester declared'),
  risk_tier: z.number().int().describe('The enforced tier (1-3)'),
  enforced_risk_tier: z.number().int().describe('The same as risk_tier'),
  status: ApprovalStatus.describe('`executed`: a consensus approval whose single-use token was minted'),
  kind: z.enum(['single', 'consensus']),
  requirement: z
    .object({
      min_approvals: z.number().int(),
      required_roles: z.array(z.string()),
      per_role_minimums: z.record(z.string(), z.number().int()),
      require_credential_types: z.array(z.string()),
      self_approval_allowed: z.boolean(),
    })
    .nullable()
    .describe('The consensus requirement; null for one human decision'),
  approvals_count: z.number().int().describe('Consensus: approving votes so far'),
  votes: z.array(
    z.object({
      user_id: z.string(),
      role: z.string(),
      decision: z.enum(['approved', 'rejected']),
      credential_type: z.string().nullable(),
      reason: z.string().nullable(),
      created_at: dateTime,
    }),
  ),
  preview: z
    .record(z.string(), z.unknown())
    .nullable()
    .describe('What the server computed (agent_transaction: decoded call, simulation, flags)'),
  rule: z.record(z.string(), z.unknown()).nullable().describe('The rule that asked for approval'),
  decision_reason: z.string().nullable(),
  decided_by: z.string().nullable(),
  decided_at: dateTime.nullable(),
  credential_type: z
    .string()
    .nullable()
    .describe('The credential the deciding human proved: session, password, totp, reauth_token'),
  expires_at: dateTime.nullable(),
  created_at: dateTime,
  executed_at: dateTime.nullable(),
  consumed_at: dateTime.nullable(),
});

export type ApprovalJson = z.infer<typeof ApprovalResponse>;

const orNull = (v: string | undefined) => (v ? v : null);

/** The HTTP view of an approval: snake_case, null for every empty value. */
export function approvalBody(a: Approval): ApprovalJson {
  const r = a.requirement;
  return {
    id: a.id,
    approval_id: a.id,
    org_id: a.orgId,
    user_id: orNull(a.userId),
    agent_id: orNull(a.agentId),
    action: a.action,
    target_type: a.targetType,
    target_id: a.targetId,
    summary: {
      title: a.summary?.title ?? '',
      body: orNull(a.summary?.body),
      fields: (a.summary?.fields ?? []).map((f) => ({ label: f.label, value: f.value })),
    },
    payload: a.payload ?? null,
    reason: orNull(a.reason),
    declared_risk_tier: a.declaredRiskTier > 0 ? a.declaredRiskTier : null,
    risk_tier: a.riskTier,
    enforced_risk_tier: a.riskTier,
    status: a.status as ApprovalJson['status'],
    kind: (a.kind || 'single') as ApprovalJson['kind'],
    requirement: r
      ? {
          min_approvals: r.minApprovals,
          required_roles: r.requiredRoles,
          per_role_minimums: r.perRoleMinimums,
          require_credential_types: r.requireCredentialTypes,
          self_approval_allowed: r.selfApprovalAllowed,
        }
      : null,
    approvals_count: a.approvalsCount,
    votes: a.votes.map((v) => ({
      user_id: v.userId,
      role: v.role,
      decision: v.decision as 'approved' | 'rejected',
      credential_type: orNull(v.credentialType),
      reason: orNull(v.reason),
      created_at: v.createdAt,
    })),
    preview: a.preview ?? null,
    rule: a.rule ?? null,
    decision_reason: orNull(a.decisionReason),
    decided_by: orNull(a.decidedBy),
    decided_at: orNull(a.decidedAt),
    credential_type: orNull(a.credentialType),
    expires_at: orNull(a.expiresAt),
    created_at: a.createdAt,
    executed_at: orNull(a.executedAt),
    consumed_at: orNull(a.consumedAt),
  };
}

/** `POST /v1/pending-approvals/{id}/execute`'s answer (the reference ExecutePendingApprovalResponse). */
export const ExecutePendingApprovalResponse = z.object({
  pending_approval_id: z.string(),
  status: z.literal('executed'),
  executed_at: dateTime,
  result: z.object({ approval_id: z.string(), target_type: z.string(), target_id: z.string() }),
});
