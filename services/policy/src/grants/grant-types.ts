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
  ip_cidrs?: string[];
  /** The request must fall inside this window. */
  time_window?: TimeWindow;
  /** The agent's `environment` claim must be one of these. */
  environment_in?: string[];
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
}
