import type { RuleFacts } from '@custos/approval-rules';
import { ConflictError, InvalidArgumentError } from '@custos/service-kit';
import type {
  ApprovalRecord,
  ApprovalSummary,
  CredentialType,
  Decision,
  Requirement,
  VoteRecord,
} from './approval-types.js';

/** Actions the platform raises itself; an agent may not request them (SPEC §4.5). */
export const PLATFORM_ACTIONS = [
  'policy_change',
  'card_order',
  'agent_transaction',
  'agent_execution',
  'agent_sign_intent',
] as const;

/** Control-plane actions an agent may request. */
export const CONTROL_PLANE_ACTIONS = ['access_request', 'policy_request', 'binding_request'] as const;

/** A business action: `namespace.verb`. */
const BUSINESS_ACTION = /^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$/;

/** SPEC §8: an approval's `action` is at most 64 characters. */
export const MAX_ACTION_LENGTH = 64;
export const MAX_TITLE_LENGTH = 200;
export const MAX_BODY_LENGTH = 4000;
export const MAX_FIELDS = 50;
export const MAX_FIELD_LABEL_LENGTH = 100;
export const MAX_FIELD_VALUE_LENGTH = 1000;
export const MAX_REASON_LENGTH = 1000;
/** The gateway's published limits of `target_type` (1-100) and `target_id` (1-500). */
export const MAX_TARGET_TYPE_LENGTH = 100;
export const MAX_TARGET_ID_LENGTH = 500;
/** The largest payload, preview or rule kept with an approval (its JSON text). */
export const MAX_JSON_BYTES = 64 * 1024;

/** The roles of an org member (a consensus requirement's `required_roles`, `per_role_minimums`). */
export const ORG_ROLES = ['owner', 'admin', 'member'] as const;

/** Checks the `action` an agent requests: a control-plane action or `namespace.verb`, never a platform one. */
export function checkRequestedAction(action: string): string {
  if (action === '') throw new InvalidArgumentError('action', 'action is required');
  if (action.length > MAX_ACTION_LENGTH)
    throw new InvalidArgumentError('action', `action must be at most ${MAX_ACTION_LENGTH} characters`);
  if ((PLATFORM_ACTIONS as readonly string[]).includes(action))
    throw new InvalidArgumentError(
      'action',
      `action ${action} is created by the platform itself and cannot be requested`,
    );
  if (!(CONTROL_PLANE_ACTIONS as readonly string[]).includes(action) && !BUSINESS_ACTION.test(action))
    throw new InvalidArgumentError(
      'action',
      `action must be one of ${CONTROL_PLANE_ACTIONS.join(', ')} or a business action namespace.verb`,
    );
  return action;
}

/** The stored decision of `approve|approved` or `reject|rejected|denied`; anything else is 400. */
export function decisionOf(raw: string): Decision {
  switch (raw.trim().toLowerCase()) {
    case 'approve':
    case 'approved':
      return 'approved';
    case 'reject':
    case 'rejected':
    case 'denied':
      return 'rejected';
    default:
      throw new InvalidArgumentError(
        'decision',
        'decision must be approve (or approved) or reject (or rejected, denied)',
      );
  }
}

/** A required short text of at most `max` characters. */
export function requiredText(value: string, field: string, max: number): string {
  if (value.trim() === '') throw new InvalidArgumentError(field, `${field} is required`);
  if (value.length > max) throw new InvalidArgumentError(field, `${field} must be at most ${max} characters`);
  return value;
}

/** An optional text of at most `max` characters; null when empty. */
export function optionalText(value: string, field: string, max: number): string | null {
  if (value.length > max) throw new InvalidArgumentError(field, `${field} must be at most ${max} characters`);
  return value === '' ? null : value;
}

/** Checks a summary: a title, an optional body and at most 50 labelled fields. */
export function checkSummary(s: ApprovalSummary | undefined): ApprovalSummary {
  if (!s) throw new InvalidArgumentError('summary', 'summary with a title is required');
  const title = requiredText(s.title, 'summary.title', MAX_TITLE_LENGTH);
  const body = optionalText(s.body, 'summary.body', MAX_BODY_LENGTH) ?? '';
  if (s.fields.length > MAX_FIELDS)
    throw new InvalidArgumentError('summary.fields', `summary.fields holds at most ${MAX_FIELDS} entries`);
  const fields = s.fields.map((f, i) => ({
    label: requiredText(f.label, `summary.fields[${i}].label`, MAX_FIELD_LABEL_LENGTH),
    value: optionalText(f.value, `summary.fields[${i}].value`, MAX_FIELD_VALUE_LENGTH) ?? '',
  }));
  return { title, body, fields };
}

/** A free-form JSON object of at most 64 KiB; null when absent. */
export function checkJsonObject(
  value: Record<string, unknown> | undefined,
  field: string,
): Record<string, unknown> | null {
  if (value === undefined) return null;
  if (Buffer.byteLength(JSON.stringify(value)) > MAX_JSON_BYTES)
    throw new InvalidArgumentError(field, `${field} must be at most ${MAX_JSON_BYTES} bytes of JSON`);
  return value;
}

/** A declared tier: 0 (none) or 1 to 3. */
export function checkDeclaredTier(tier: number): 1 | 2 | 3 | null {
  if (tier === 0) return null;
  if (tier === 1 || tier === 2 || tier === 3) return tier;
  throw new InvalidArgumentError('declared_risk_tier', 'declared_risk_tier must be an integer from 1 to 3');
}

/** An enforced tier given by a caller (signer): 1 to 3. */
export function checkRiskTier(tier: number): 1 | 2 | 3 {
  if (tier === 1 || tier === 2 || tier === 3) return tier;
  throw new InvalidArgumentError('risk_tier', 'risk_tier must be an integer from 1 to 3');
}

/** The enforced tier: the highest of the declared and the derived tier, and never below 1. */
export function enforcedTier(declared: number | null, derived: number | undefined): 1 | 2 | 3 {
  return Math.min(3, Math.max(1, declared ?? 1, derived ?? 1)) as 1 | 2 | 3;
}

const DECIMAL = /^[0-9]+$/;
const HEX = /^0x[0-9a-fA-F]+$/;
const MAJOR = /^([0-9]+)\.([0-9]{1,18})$/;

/**
 * A payload value in the chain's smallest unit: a decimal or `0x` hex integer string or a safe
 * integer is wei; a decimal with a fraction is the major unit (DECISIONS.md: `"0.01"` ETH).
 * Anything else is no fact at all (a condition on it does not match).
 */
export function valueWeiOf(v: unknown, allowMajor: boolean): bigint | undefined {
  if (typeof v === 'number') return Number.isSafeInteger(v) && v >= 0 ? BigInt(v) : undefined;
  if (typeof v !== 'string') return undefined;
  const s = v.trim();
  if (DECIMAL.test(s) || HEX.test(s)) return BigInt(s);
  const m = allowMajor ? MAJOR.exec(s) : null;
  if (m) return BigInt(m[1]!) * 10n ** 18n + BigInt(m[2]!.padEnd(18, '0'));
  return undefined;
}

/**
 * The facts an agent's requested action offers its action_approval_policy: the action, and from
 * the payload `chain` (name, or id when a number), `chain_id`, `to`, and `value_wei` or `value`.
 */
export function factsOfRequest(action: string, payload: Record<string, unknown> | null): RuleFacts {
  const facts: RuleFacts = { action };
  if (!payload) return facts;
  const chain = payload['chain'];
  if (typeof chain === 'string' && chain !== '') facts.chain = chain;
  else if (typeof chain === 'number' && Number.isSafeInteger(chain)) facts.chainId = String(chain);
  const chainId = payload['chain_id'];
  if (
    (typeof chainId === 'number' && Number.isSafeInteger(chainId)) ||
    (typeof chainId === 'string' && DECIMAL.test(chainId))
  )
    facts.chainId = String(chainId);
  const to = payload['to'];
  if (typeof to === 'string' && to !== '') facts.to = to;
  const value =
    payload['value_wei'] !== undefined
      ? valueWeiOf(payload['value_wei'], false)
      : valueWeiOf(payload['value'], true);
  if (value !== undefined) facts.valueWei = value;
  return facts;
}

/**
 * The credential types a vote at each tier can carry (what `prove` records): tier 1 the session
 * or any step-up sent, tier 2 a step-up (rat_ token, password or TOTP), tier 3 a TOTP code.
 */
export function votableCredentialTypes(tier: number): readonly CredentialType[] {
  if (tier <= 1) return ['session', 'reauth_token', 'password', 'totp'];
  if (tier === 2) return ['reauth_token', 'password', 'totp'];
  return ['totp'];
}

/**
 * Checks a consensus requirement: at least one approval, known roles (a per-role minimum only for
 * a role that may vote), non-negative minimums, and credential types a vote at `tier` can carry
 * (a requirement no vote can meet would hold the approval pending until it expires).
 */
export function checkRequirement(r: Requirement, tier: number): Requirement {
  if (!Number.isInteger(r.minApprovals) || r.minApprovals < 1 || r.minApprovals > 100)
    throw new InvalidArgumentError('requirement.min_approvals', 'min_approvals must be from 1 to 100');
  for (const role of r.requiredRoles) {
    if (!(ORG_ROLES as readonly string[]).includes(role))
      throw new InvalidArgumentError(
        'requirement.required_roles',
        `unknown role ${role} in required_roles: roles are ${ORG_ROLES.join(', ')}`,
      );
  }
  for (const [role, n] of Object.entries(r.perRoleMinimums)) {
    if (!(ORG_ROLES as readonly string[]).includes(role))
      throw new InvalidArgumentError(
        'requirement.per_role_minimums',
        `unknown role ${role} in per_role_minimums: roles are ${ORG_ROLES.join(', ')}`,
      );
    if (r.requiredRoles.length > 0 && !r.requiredRoles.includes(role))
      throw new InvalidArgumentError(
        'requirement.per_role_minimums',
        `per_role_minimums names ${role}, which is not in required_roles (its members may not vote)`,
      );
    if (!Number.isInteger(n) || n < 0 || n > 100)
      throw new InvalidArgumentError('requirement.per_role_minimums', 'a role minimum must be from 0 to 100');
  }
  const votable = votableCredentialTypes(tier);
  if (
    r.requireCredentialTypes.length > 0 &&
    !r.requireCredentialTypes.some((t) => (votable as readonly string[]).includes(t))
  )
    throw new InvalidArgumentError(
      'requirement.require_credential_types',
      `no vote on a tier ${tier} approval can carry ${r.requireCredentialTypes.join(', ')}: a vote carries ${votable.join(', ')}`,
    );
  return {
    minApprovals: r.minApprovals,
    requiredRoles: [...new Set(r.requiredRoles)],
    perRoleMinimums: { ...r.perRoleMinimums },
    requireCredentialTypes: [...new Set(r.requireCredentialTypes)],
    selfApprovalAllowed: r.selfApprovalAllowed,
  };
}

/** How a consensus approval stands after its votes. */
export interface Tally {
  approvals: number;
  rejections: number;
  /** Approving votes by the voter's role. */
  approvalsByRole: Record<string, number>;
  /** `rejected` on any reject; `approved` once every part of the requirement is met. */
  status: 'pending' | 'approved' | 'rejected';
}

/**
 * Counts the votes: one reject ends it; it is approved when the approving votes reach
 * min_approvals, every per-role minimum is met, and (when credential types are required) some
 * approving vote used one of them.
 */
export function tally(
  votes: readonly Pick<VoteRecord, 'role' | 'decision' | 'credentialType'>[],
  r: Requirement,
): Tally {
  const approving = votes.filter((v) => v.decision === 'approved');
  const rejections = votes.length - approving.length;
  const approvalsByRole: Record<string, number> = {};
  for (const v of approving) approvalsByRole[v.role] = (approvalsByRole[v.role] ?? 0) + 1;
  const base = { approvals: approving.length, rejections, approvalsByRole };
  if (rejections > 0) return { ...base, status: 'rejected' };
  const enough = approving.length >= r.minApprovals;
  const rolesMet = Object.entries(r.perRoleMinimums).every(([role, n]) => (approvalsByRole[role] ?? 0) >= n);
  const credentialMet =
    r.requireCredentialTypes.length === 0 ||
    approving.some((v) => r.requireCredentialTypes.includes(v.credentialType));
  return { ...base, status: enough && rolesMet && credentialMet ? 'approved' : 'pending' };
}

/**
 * Why a human may not vote on a consensus approval, or undefined when they may: a role outside
 * `required_roles`, or the agent's creator without `self_approval_allowed`.
 */
export function voterRefusal(
  r: Requirement,
  voter: { userId: string; role: string },
  agentCreator: string | null,
): string | undefined {
  if (r.requiredRoles.length > 0 && !r.requiredRoles.includes(voter.role))
    return `only ${r.requiredRoles.join(', ')} members may vote on this approval`;
  if (!r.selfApprovalAllowed && agentCreator !== null && voter.userId === agentCreator)
    return "the agent's creator may not approve its own agent's request (self-approval is not allowed)";
  return undefined;
}

/**
 * Why a human may not execute a consensus approval, or undefined when they may: a role outside
 * `required_roles`, or the agent's creator without `self_approval_allowed` (executing is the last
 * human act of the consensus, so it is held to the same rule as a vote).
 */
export function executorRefusal(
  r: Requirement,
  executor: { userId: string; role: string },
  agentCreator: string | null,
): string | undefined {
  if (r.requiredRoles.length > 0 && !r.requiredRoles.includes(executor.role))
    return `only ${r.requiredRoles.join(', ')} members may execute this approval`;
  if (!r.selfApprovalAllowed && agentCreator !== null && executor.userId === agentCreator)
    return "the agent's creator may not execute its own agent's approval (self-approval is not allowed)";
  return undefined;
}

/**
 * The proof a tier needs: tier 1 none (a credential sent is still checked), tier 2 a step-up with
 * any method, tier 3 a TOTP code. True when `method` (undefined: none sent) satisfies `tier`.
 */
export function proofSatisfies(tier: number, method: CredentialType | undefined): boolean {
  if (tier <= 1) return true;
  if (method === undefined || method === 'session') return false;
  return tier === 2 || method === 'totp';
}

/** A 409 when an approval is no longer pending: decided, executed or (swept) expired. */
export function requirePending(a: Pick<ApprovalRecord, 'status'>): void {
  if (a.status !== 'pending') throw new ConflictError(`the approval is ${a.status} and cannot be decided`);
}

/**
 * A 409 when an approval can no longer be decided: not pending, or past its expiry. `unexpired` is
 * the database's own `expires_at > now()` read under the row lock: only the database's clock
 * judges expiry, so a service clock that lags or runs ahead neither reopens nor closes it.
 */
export function requireOpen(a: Pick<ApprovalRecord, 'status'>, unexpired: boolean): void {
  requirePending(a);
  if (!unexpired) throw new ConflictError('the approval has expired and cannot be decided');
}
