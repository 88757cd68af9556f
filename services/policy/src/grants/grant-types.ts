import type { StoredRule } from '@custos/approval-rules';

/** What a grant gives or takes away (SPEC §2.3). */
export type Permission = 'read' | 'write';
/** Who a grant is for. */
export type PrincipalType = 'user' | 'agent';
/** Policy Engine v2: the winning grant's effect decides. */
export type Effect = 'allow' | 'deny';

/** Every permission a grant may name. */
export const PERMISSIONS: readonly Permission[] = ['read', 'write'];
/** Every principal type a grant may name. */
export const PRINCIPAL_TYPES: readonly PrincipalType[] = ['user', 'agent'];
/** Every effect a grant may have. */
export const EFFECTS: readonly Effect[] = ['allow', 'deny'];

/** A daily window of local time, `start` inclusive and `end` exclusive; `start > end` spans midnight. */
export interface TimeWindow {
  /** `HH:MM`, 24-hour clock. */
  start: string;
  /** `HH:MM`, 24-hour clock. */
  end: string;
  /** IANA time zone the clock times are read in; `UTC` when absent. */
  timezone?: string;
  /** Local weekdays (`mon`…`sun`) on which the window opens; every day when absent. */
  days?: string[];
}

/** The conditions a grant applies under; every present one must hold. */
export interface Conditions {
  /** The client's address must lie in one of these CIDRs (or be one of these addresses). */
  ipCidrs?: string[];
  /** The request must fall inside this window. */
  timeWindow?: TimeWindow;
  /** The agent's `environment` claim must be one of these. */
  environmentIn?: string[];
}

/** A grant as the rules see it. */
export interface Grant {
  id: string;
  vaultId: string;
  principalType: PrincipalType;
  principalId: string;
  secretPathPattern: string;
  permissions: readonly Permission[];
  conditions: Conditions;
  effect: Effect;
  priority: number;
  expiresAt: Date | null;
  createdAt: Date;
}

/** A grant as stored, with its bookkeeping. */
export interface GrantRecord extends Grant {
  orgId: string;
  /** The agent's actions matching it need humans (agent grants only); null when none. */
  consensusTrigger: StoredRule | null;
  createdBy: string;
  updatedAt: Date;
}

/**
 * Who owns a vault, as vault-crypto's DescribeVault told the gateway, which asked with the
 * caller's token. The policy service calls no other service (the call graph stays a DAG:
 * gateway → {identity, vault-crypto, policy}, vault-crypto → policy, identity → policy); it trusts
 * these facts from its callers, as the mTLS caller allow-lists will make explicit.
 */
export interface VaultFacts {
  vaultId: string;
  orgId: string;
  createdBy: string;
  /** `user`, `agent` or `system`. */
  createdByType: string;
  isSystem: boolean;
}

/** A new grant as a caller asks for it (unchecked; see `checkGrantInput`). */
export interface GrantRequest {
  secretPathPattern: string;
  principalType: string;
  principalId: string;
  permissions: readonly string[];
  /** Absent or empty: unconditional. */
  conditions?: Conditions | undefined;
  /** Absent: `allow`. */
  effect?: string | undefined;
  /** Absent: 0. */
  priority?: number | undefined;
  /** RFC 3339; absent: never expires. */
  expiresAt?: string | undefined;
  /** Agent grants only; absent: none. */
  consensusTrigger?: StoredRule | undefined;
}

/** The fields of a grant that a partial update may reset to their default. */
export const CLEARABLE_FIELDS = [
  'conditions',
  'effect',
  'priority',
  'expires_at',
  'consensus_trigger',
] as const;
/** A field a partial update may reset. */
export type ClearableField = (typeof CLEARABLE_FIELDS)[number];

/**
 * A partial update as a caller asks for it (unchecked; see `checkGrantChange`): absent fields
 * keep their value, `cleared` ones go back to their default.
 */
export interface GrantChangeRequest {
  secretPathPattern?: string | undefined;
  /** Absent or empty: unchanged. */
  permissions?: readonly string[] | undefined;
  conditions?: Conditions | undefined;
  effect?: string | undefined;
  priority?: number | undefined;
  expiresAt?: string | undefined;
  consensusTrigger?: StoredRule | undefined;
  cleared: readonly string[];
}

/** The checked fields of a new grant. */
export interface GrantInput {
  secretPathPattern: string;
  principalType: PrincipalType;
  principalId: string;
  permissions: Permission[];
  conditions: Conditions;
  effect: Effect;
  priority: number;
  expiresAt: Date | null;
  consensusTrigger: StoredRule | null;
}

/** The checked fields a partial update changes; absent ones keep their value. */
export type GrantChange = Partial<Omit<GrantInput, 'principalType' | 'principalId'>>;

/**
 * Who a decision is for, as the asking service verified it from the principal's token
 * (DecideRequest.principal); a verified Principal of @custos/auth is one.
 */
export type DecisionPrincipal =
  | { readonly kind: 'user'; readonly userId: string; readonly orgId: string }
  | {
      readonly kind: 'agent';
      readonly agentId: string;
      readonly orgId: string;
      readonly environment?: string;
    };

/** What a decision is about: who asks, from where, when, for what. */
export interface DecisionRequest {
  principalType: PrincipalType;
  principalId: string;
  /** The org of the caller's token. */
  principalOrgId: string;
  /** The agent's `environment` claim; absent for users. */
  environment?: string;
  /** The client's address as the gateway resolved it; absent when unknown. */
  clientIp?: string;
  vaultId: string;
  vaultOrgId: string;
  path: string;
  permission: Permission;
  now: Date;
}

/** Why a decision came out as it did (DecideResponse.reason). */
export type DecisionReason = 'allow' | 'deny' | 'no_match' | 'other_org';

/** The outcome of evaluating a principal's grants. */
export interface Decision {
  allowed: boolean;
  /** The grant that decided; empty when none did. */
  policyId: string;
  reason: DecisionReason;
  /**
   * How long the same question gets the same answer whatever the client address and clock, unless
   * a grant changes (milliseconds; 0: ask each time). See `cacheableForMs` in decide-fns.
   */
  cacheableForMs: number;
}
