import type {
  StoredCondition,
  StoredConditionSet,
  StoredPolicy,
  StoredRequirement,
  StoredRule,
} from '@custos/approval-rules';
/** The environments an agent can be scoped to (spec §2.4). */
export const AGENT_ENVIRONMENTS = ['production', 'preview', 'development', 'custom'] as const;
/** One of AGENT_ENVIRONMENTS. */
export type AgentEnvironment = (typeof AGENT_ENVIRONMENTS)[number];

/** What a transaction to a screened address does. */
export const SCREENING_MODES = ['off', 'deny', 'approve'] as const;
/** Whether execution guardrails only log or also refuse. */
export const ENFORCEMENT_MODES = ['log', 'approve', 'enforce'] as const;
/** What EIP-712 domains off the allowlist get. */
export const EIP712_POLICIES = ['allow', 'deny'] as const;
/** A per-chain override of the transaction limits; amounts are decimal strings. */
export interface ChainGuardrail {
  maxValue?: string;
  dailyLimit?: string;
  toAllowlist?: string[];
  gasDailyBudgetNative?: string;
}

export { APPROVAL_CONDITION_TYPES } from '@custos/approval-rules';
/** One condition of an approval rule; `type` says which other field it reads. */
export type ApprovalCondition = StoredCondition;
/** A consensus requirement of an approval rule. */
export type ApprovalRequirement = StoredRequirement;
/** Conditions that match together (the reference's FlatConditionSet). */
export type ApprovalConditionSet = StoredConditionSet;
/** A rule that sends an agent's matching actions to humans (DECISIONS.md, consensus vocabulary). */
export type ApprovalRule = StoredRule;
/** The approval rules of an agent. */
export type ActionApprovalPolicy = StoredPolicy;

/** The policy settings of an agent (spec §2.4); null means unset (no limit, no cap, from grants). */
export interface AgentSettings {
  scopes: string[] | null;
  vaultIds: string[];
  intentsApiEnabled: boolean;
  messageSigningEnabled: boolean;
  rawSigningEnabled: boolean;
  executionIntentsEnabled: boolean;
  proxyEnabled: boolean;
  proxyConfig: Record<string, unknown> | null;
  federationEnabled: boolean;
  federationAudiences: string[];
  federatedTokenTtlSeconds: number;
  tokenTtlSeconds: number;
  /** ISO 8601, as the caller sent it. */
  apiKeyExpiresAt: string | null;
  actionApprovalPolicy: ActionApprovalPolicy | null;
  addressScreeningPolicy: { mode: (typeof SCREENING_MODES)[number] };
  executionGuardrails: { enforcement: (typeof ENFORCEMENT_MODES)[number] };
  perChainGuardrails: Record<string, ChainGuardrail>;
  txMaxValueEth: string | null;
  txDailyLimitEth: string | null;
  txMaxPerDay: number | null;
  maxFeePerGasGwei: number | null;
  maxGasLimit: number | null;
  txToAllowlist: string[];
  txAllowedChains: string[];
  eip712DomainAllowlist: string[];
  eip712DefaultPolicy: (typeof EIP712_POLICIES)[number];
  usdcDailyLimitUsd: number | null;
  /** All spend of a UTC day over all chains, valued in USD; null means no cap. */
  usdDailyLimitUsd: number | null;
  environment: AgentEnvironment;
  envAutoResolve: boolean;
  intentsRequireTee: boolean;
  executionRequireTee: boolean;
}

/** The settings that may be null, i.e. cleared. */
export type NullableSetting = {
  [K in keyof AgentSettings]: null extends AgentSettings[K] ? K : never;
}[keyof AgentSettings];

/** An agent as identity's rules see it. */
export interface Agent {
  id: string;
  orgId: string;
  name: string;
  description: string;
  isActive: boolean;
  createdBy: string;
  createdAt: Date;
  updatedAt: Date;
  lastActiveAt: Date | null;
  settings: AgentSettings;
}

/**
 * What a create or update sets: absent fields stay as they are (on create: their defaults); a
 * nullable setting given as null is cleared.
 */
export interface AgentChange {
  name?: string;
  description?: string;
  /** Update only. */
  isActive?: boolean;
  settings: Partial<AgentSettings>;
}

/** The access claims of an agent token. */
export interface AgentAccess {
  scopes: string[];
  vaultIds: string[];
}

/** A minted agent access token, as the exchange answers it. */
export interface AgentToken {
  token: string;
  expiresIn: number;
}
