import { InvalidArgumentError, isUuid } from '@custos/service-kit';
import { parseConditions } from './condition-fns.js';
import {
  type Conditions,
  EFFECTS,
  type Effect,
  type Grant,
  PERMISSIONS,
  PRINCIPAL_TYPES,
  type Permission,
  type PrincipalType,
} from './grant-types.js';

const LITERAL_SEGMENT = /^[A-Za-z0-9_-]+$/;
const MAX_PATTERN = 512;
/** The highest priority a grant may have (the lowest is 0, the default). */
export const MAX_PRIORITY = 1_000_000;

const CREATE_FIELDS = new Set([
  'secret_path_pattern',
  'principal_type',
  'principal_id',
  'permissions',
  'conditions',
  'effect',
  'priority',
  'expires_at',
]);
const IMMUTABLE_FIELDS = new Set(['principal_type', 'principal_id']);

/**
 * A secret-path glob (DECISIONS.md): `/`-separated segments, each `*` (one segment), `**` (zero
 * or more) or a literal of the characters a secret path allows. A `*` inside a literal such as
 * `db-*` is refused rather than silently matched as text.
 */
export function secretPathPattern(v: unknown, field = 'secret_path_pattern'): string {
  if (typeof v !== 'string' || v.length === 0) {
    throw new InvalidArgumentError(field, `${field} is required and must be a non-empty string`);
  }
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

function principalType(v: unknown): PrincipalType {
  if (typeof v !== 'string' || !(PRINCIPAL_TYPES as readonly string[]).includes(v)) {
    throw new InvalidArgumentError('principal_type', 'principal_type must be user or agent');
  }
  return v as PrincipalType;
}

function principalId(v: unknown): string {
  if (typeof v !== 'string' || !isUuid(v))
    throw new InvalidArgumentError('principal_id', 'principal_id must be a UUID');
  return v.toLowerCase();
}

/** A non-empty subset of read/write, deduplicated in canonical order. */
export function permissions(v: unknown): Permission[] {
  if (!Array.isArray(v) || v.length === 0) {
    throw new InvalidArgumentError('permissions', 'permissions must be a non-empty list of read, write');
  }
  for (const p of v) {
    if (typeof p !== 'string' || !(PERMISSIONS as readonly string[]).includes(p)) {
      throw new InvalidArgumentError('permissions', 'permissions may hold only read and write');
    }
  }
  return PERMISSIONS.filter((p) => v.includes(p));
}

function effect(v: unknown): Effect {
  if (v === undefined || v === null) return 'allow';
  if (typeof v !== 'string' || !(EFFECTS as readonly string[]).includes(v)) {
    throw new InvalidArgumentError('effect', 'effect must be allow or deny');
  }
  return v as Effect;
}

function priority(v: unknown): number {
  if (v === undefined || v === null) return 0;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > MAX_PRIORITY) {
    throw new InvalidArgumentError('priority', `priority must be an integer from 0 to ${MAX_PRIORITY}`);
  }
  return v;
}

/** An optional ISO 8601 date-time in the future; null clears. */
export function expiresAt(v: unknown, now: Date, field = 'expires_at'): Date | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/.test(v) || Number.isNaN(Date.parse(v))) {
    throw new InvalidArgumentError(field, `${field} must be an ISO 8601 date-time`);
  }
  const t = new Date(v);
  if (t.getTime() <= now.getTime()) throw new InvalidArgumentError(field, `${field} must be in the future`);
  return t;
}

/** The fields of a new grant, validated. */
export interface GrantInput {
  secretPathPattern: string;
  principalType: PrincipalType;
  principalId: string;
  permissions: Permission[];
  conditions: Conditions;
  effect: Effect;
  priority: number;
  expiresAt: Date | null;
}

/** The fields a partial update changes; absent ones keep their value. */
export type GrantChange = Partial<Omit<GrantInput, 'principalType' | 'principalId'>>;

function refuseUnknown(fields: Record<string, unknown>): void {
  for (const k of Object.keys(fields)) {
    if (!CREATE_FIELDS.has(k)) throw new InvalidArgumentError(k, `${k} is not a field of a policy`);
  }
}

/** Validates a create body field by field, naming the first refused one. */
export function parseGrantInput(fields: Record<string, unknown>, now: Date): GrantInput {
  refuseUnknown(fields);
  const type = principalType(fields['principal_type']);
  return {
    secretPathPattern: secretPathPattern(fields['secret_path_pattern']),
    principalType: type,
    principalId: principalId(fields['principal_id']),
    permissions: permissions(fields['permissions']),
    conditions: parseConditions(fields['conditions'], type),
    effect: effect(fields['effect']),
    priority: priority(fields['priority']),
    expiresAt: expiresAt(fields['expires_at'], now),
  };
}

/**
 * Validates a partial update of a grant of `type`. The principal cannot change (a different
 * principal is a different grant: delete and create); an explicit null resets a field to its
 * default (no conditions, allow, priority 0, no expiry).
 */
export function parseGrantChange(
  fields: Record<string, unknown>,
  type: PrincipalType,
  now: Date,
): GrantChange {
  refuseUnknown(fields);
  for (const k of IMMUTABLE_FIELDS) {
    if (k in fields)
      throw new InvalidArgumentError(k, `${k} cannot be changed; delete the policy and create another`);
  }
  const has = (k: string) => k in fields;
  return {
    ...(has('secret_path_pattern')
      ? { secretPathPattern: secretPathPattern(fields['secret_path_pattern']) }
      : {}),
    ...(has('permissions') ? { permissions: permissions(fields['permissions']) } : {}),
    ...(has('conditions') ? { conditions: parseConditions(fields['conditions'], type) } : {}),
    ...(has('effect') ? { effect: effect(fields['effect']) } : {}),
    ...(has('priority') ? { priority: priority(fields['priority']) } : {}),
    ...(has('expires_at') ? { expiresAt: expiresAt(fields['expires_at'], now) } : {}),
  };
}

/** A stored grant with its bookkeeping. */
export interface GrantRecord extends Grant {
  orgId: string;
  createdBy: string;
  updatedAt: Date;
}

/** The grant as HTTP returns it (the reference's PolicyResponse plus `updated_at`). */
export function grantView(g: GrantRecord): Record<string, unknown> {
  return {
    id: g.id,
    vault_id: g.vaultId,
    secret_path_pattern: g.secretPathPattern,
    principal_type: g.principalType,
    principal_id: g.principalId,
    permissions: [...g.permissions],
    conditions: { ...g.conditions },
    effect: g.effect,
    priority: g.priority,
    expires_at: g.expiresAt?.toISOString() ?? null,
    created_by: g.createdBy,
    created_by_type: 'user',
    created_at: g.createdAt.toISOString(),
    updated_at: g.updatedAt.toISOString(),
  };
}

/** What a policy event says: the grant's facts, never a secret (there is none in a grant). */
export function grantEventData(g: GrantRecord, actorId: string, changed?: string[]): Record<string, unknown> {
  const { created_by_type: _t, ...view } = grantView(g);
  return { policy_id: g.id, ...view, actor_type: 'user', actor_id: actorId, ...(changed ? { changed } : {}) };
}

/** What an audit record of a grant change says: the grant's facts (a grant holds no secret). */
export function grantAuditMetadata(g: GrantRecord, changed?: string[]): Record<string, unknown> {
  const { id: _id, created_at: _c, updated_at: _u, created_by_type: _t, ...view } = grantView(g);
  return { ...view, ...(changed ? { changed } : {}) };
}

/** The HTTP names of the fields a change touches, in a stable order. */
export function changedFields(c: GrantChange): string[] {
  const names: Array<[keyof GrantChange, string]> = [
    ['secretPathPattern', 'secret_path_pattern'],
    ['permissions', 'permissions'],
    ['conditions', 'conditions'],
    ['effect', 'effect'],
    ['priority', 'priority'],
    ['expiresAt', 'expires_at'],
  ];
  return names.filter(([k]) => c[k] !== undefined).map(([, n]) => n);
}
