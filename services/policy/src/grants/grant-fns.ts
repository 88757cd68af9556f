import {
  type StoredRule,
  approvalRuleJson,
  checkApprovalRule,
  storedRuleMessage,
} from '@custos/approval-rules';
import { InvalidArgumentError, isUuid } from '@custos/service-kit';
import { checkConditions, conditionsJson } from './condition-fns.js';
import {
  CLEARABLE_FIELDS,
  type ClearableField,
  EFFECTS,
  type Effect,
  type GrantChange,
  type GrantChangeRequest,
  type GrantInput,
  type GrantRecord,
  type GrantRequest,
  PERMISSIONS,
  PRINCIPAL_TYPES,
  type Permission,
  type PrincipalType,
} from './grant-types.js';

// The gateway checks the shape of a request (types, required and unknown fields) before any RPC;
// these functions hold the rules of a grant's values, and re-check enums and ranges cheaply so a
// direct caller cannot store what the gateway would refuse.

const LITERAL_SEGMENT = /^[A-Za-z0-9_-]+$/;
const MAX_PATTERN = 512;
/** The highest priority a grant may have (the lowest is 0, the default). */
export const MAX_PRIORITY = 1_000_000;

/**
 * A secret-path glob (DECISIONS.md): `/`-separated segments, each `*` (one segment), `**` (zero
 * or more) or a literal of the characters a secret path allows. A `*` inside a literal such as
 * `db-*` is refused rather than silently matched as text.
 */
export function secretPathPattern(v: string, field = 'secret_path_pattern'): string {
  if (v.length === 0) throw new InvalidArgumentError(field, `${field} must not be empty`);
  if (v.length > MAX_PATTERN)
    throw new InvalidArgumentError(field, `${field} must be at most ${MAX_PATTERN} characters`);
  for (const seg of v.split('/')) {
    if (seg !== '*' && seg !== '**' && !LITERAL_SEGMENT.test(seg)) {
      throw new InvalidArgumentError(
        field,
        `${field} must be "/"-separated segments, each "*", "**" or letters, digits, "-" and "_"`,
      );
    }
  }
  return v;
}

function principalType(v: string): PrincipalType {
  if (!(PRINCIPAL_TYPES as readonly string[]).includes(v)) {
    throw new InvalidArgumentError('principal_type', 'principal_type must be user or agent');
  }
  return v as PrincipalType;
}

function principalId(v: string): string {
  if (!isUuid(v)) throw new InvalidArgumentError('principal_id', 'principal_id must be a UUID');
  return v.toLowerCase();
}

/** A non-empty subset of read/write, deduplicated in canonical order. */
export function permissions(v: readonly string[]): Permission[] {
  if (v.length === 0) {
    throw new InvalidArgumentError('permissions', 'permissions must be a non-empty list of read, write');
  }
  if (!v.every((p) => (PERMISSIONS as readonly string[]).includes(p))) {
    throw new InvalidArgumentError('permissions', 'permissions may hold only read and write');
  }
  return PERMISSIONS.filter((p) => v.includes(p));
}

function effect(v: string | undefined): Effect {
  if (v === undefined) return 'allow';
  if (!(EFFECTS as readonly string[]).includes(v)) {
    throw new InvalidArgumentError('effect', 'effect must be allow or deny');
  }
  return v as Effect;
}

function priority(v: number | undefined): number {
  if (v === undefined) return 0;
  if (!Number.isInteger(v) || v < 0 || v > MAX_PRIORITY) {
    throw new InvalidArgumentError('priority', `priority must be an integer from 0 to ${MAX_PRIORITY}`);
  }
  return v;
}

/** An optional RFC 3339 date-time in the future; absent means never. */
export function expiresAt(v: string | undefined, now: Date, field = 'expires_at'): Date | null {
  if (v === undefined) return null;
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/.test(v) || Number.isNaN(Date.parse(v))) {
    throw new InvalidArgumentError(field, `${field} must be an ISO 8601 date-time`);
  }
  const t = new Date(v);
  if (t.getTime() <= now.getTime()) throw new InvalidArgumentError(field, `${field} must be in the future`);
  return t;
}

/**
 * A consensus trigger (DECISIONS.md: the reference's `consensus_trigger`, on an agent's grant, is a
 * rule of that agent's approvals): agent grants only, and the rules of an approval rule
 * (@custos/approval-rules), so no direct caller stores what the matcher would read differently.
 */
function consensusTrigger(v: StoredRule | undefined, type: PrincipalType): StoredRule | null {
  if (v === undefined) return null;
  if (type !== 'agent') {
    throw new InvalidArgumentError(
      'consensus_trigger',
      "consensus_trigger applies to an agent's transactions and sign intents: only on grants whose principal_type is agent",
    );
  }
  checkApprovalRule('consensus_trigger', v);
  if (!v.approval)
    throw new InvalidArgumentError('consensus_trigger.approval', 'consensus_trigger.approval is required');
  // A trigger applies to transactions and sign intents (signer); agents' own approval requests
  // read only the agent's action_approval_policy, so action conditions would be silently ignored.
  const sets = [
    v.conditions,
    ...(v.skipWhen ?? []).map((x) => x.conditions),
    ...(v.requireWhen ?? []).map((x) => x.conditions),
  ];
  for (const conditions of sets) {
    const c = conditions.find((x) => x.type === 'action_in' || x.type === 'action_kind_in');
    if (c)
      throw new InvalidArgumentError(
        'consensus_trigger.conditions',
        `consensus_trigger applies to transactions and sign intents: a ${c.type} condition is not taken (put it in the agent's action_approval_policy)`,
      );
  }
  return v;
}

/** Checks a new grant field by field, naming the first refused one, and fills the defaults. */
export function checkGrantInput(r: GrantRequest, now: Date): GrantInput {
  const type = principalType(r.principalType);
  return {
    secretPathPattern: secretPathPattern(r.secretPathPattern),
    principalType: type,
    principalId: principalId(r.principalId),
    permissions: permissions(r.permissions),
    conditions: checkConditions(r.conditions, type),
    effect: effect(r.effect),
    priority: priority(r.priority),
    expiresAt: expiresAt(r.expiresAt, now),
    consensusTrigger: consensusTrigger(r.consensusTrigger, type),
  };
}

function clearedFields(cleared: readonly string[]): Set<ClearableField> {
  for (const f of cleared) {
    if (!(CLEARABLE_FIELDS as readonly string[]).includes(f)) {
      throw new InvalidArgumentError(f, `${f} cannot be cleared; send a value instead`);
    }
  }
  return new Set(cleared as ClearableField[]);
}

/**
 * Checks a partial update of a grant of `type`: present fields change, cleared ones go back to
 * their default (no conditions, allow, priority 0, no expiry). The principal never changes (a
 * different principal is a different grant: delete and create).
 */
export function checkGrantChange(r: GrantChangeRequest, type: PrincipalType, now: Date): GrantChange {
  const cleared = clearedFields(r.cleared);
  const set = (f: ClearableField, present: boolean) => {
    if (present && cleared.has(f)) throw new InvalidArgumentError(f, `${f} cannot be both set and cleared`);
    return present || cleared.has(f);
  };
  return {
    ...(r.secretPathPattern !== undefined
      ? { secretPathPattern: secretPathPattern(r.secretPathPattern) }
      : {}),
    ...(r.permissions?.length ? { permissions: permissions(r.permissions) } : {}),
    ...(set('conditions', r.conditions !== undefined)
      ? { conditions: checkConditions(r.conditions, type) }
      : {}),
    ...(set('effect', r.effect !== undefined) ? { effect: effect(r.effect) } : {}),
    ...(set('priority', r.priority !== undefined) ? { priority: priority(r.priority) } : {}),
    ...(set('expires_at', r.expiresAt !== undefined) ? { expiresAt: expiresAt(r.expiresAt, now) } : {}),
    ...(set('consensus_trigger', r.consensusTrigger !== undefined)
      ? { consensusTrigger: consensusTrigger(r.consensusTrigger, type) }
      : {}),
  };
}

/** A grant's facts as its events and audit records carry them (a grant holds no secret). */
function grantFacts(g: GrantRecord): Record<string, unknown> {
  return {
    vault_id: g.vaultId,
    secret_path_pattern: g.secretPathPattern,
    principal_type: g.principalType,
    principal_id: g.principalId,
    permissions: [...g.permissions],
    conditions: conditionsJson(g.conditions),
    effect: g.effect,
    priority: g.priority,
    expires_at: g.expiresAt?.toISOString() ?? null,
    // The rule as the API shows it (conditions and thresholds, no secret).
    consensus_trigger: g.consensusTrigger ? approvalRuleJson(storedRuleMessage(g.consensusTrigger)) : null,
    created_by: g.createdBy,
  };
}

/** What a `policy.*` event says (the event catalogue's payload). */
export function grantEventData(g: GrantRecord, actorId: string, changed?: string[]): Record<string, unknown> {
  return {
    policy_id: g.id,
    id: g.id,
    ...grantFacts(g),
    created_at: g.createdAt.toISOString(),
    updated_at: g.updatedAt.toISOString(),
    actor_type: 'user',
    actor_id: actorId,
    ...(changed ? { changed } : {}),
  };
}

/** The details of an audit record of a grant change. */
export function grantAuditDetails(g: GrantRecord, changed?: string[]): Record<string, unknown> {
  return { ...grantFacts(g), ...(changed ? { changed } : {}) };
}

/** The names of the fields a change touches, in a stable order (as events and audit name them). */
export function changedFields(c: GrantChange): string[] {
  const names: Array<[keyof GrantChange, string]> = [
    ['secretPathPattern', 'secret_path_pattern'],
    ['permissions', 'permissions'],
    ['conditions', 'conditions'],
    ['effect', 'effect'],
    ['priority', 'priority'],
    ['expiresAt', 'expires_at'],
    ['consensusTrigger', 'consensus_trigger'],
  ];
  return names.filter(([k]) => c[k] !== undefined).map(([, n]) => n);
}
