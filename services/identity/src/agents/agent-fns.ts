import { InvalidArgumentError, isUuid } from '@custos/service-kit';
import {
  AGENT_ENVIRONMENTS,
  type AgentAccess,
  type AgentChange,
  type AgentSettings,
  EIP712_POLICIES,
  ENFORCEMENT_MODES,
  type NullableSetting,
  SCREENING_MODES,
} from './agent-types.js';
import { checkApprovalPolicy } from '@custos/approval-rules';

/**
 * The name of every setting in the API, in audit records and in stored settings (the order is the
 * order agents are shown in).
 */
export const SETTING_NAMES: { readonly [K in keyof AgentSettings]: string } = {
  scopes: 'scopes',
  vaultIds: 'vault_ids',
  intentsApiEnabled: 'intents_api_enabled',
  messageSigningEnabled: 'message_signing_enabled',
  rawSigningEnabled: 'raw_signing_enabled',
  executionIntentsEnabled: 'execution_intents_enabled',
  proxyEnabled: 'proxy_enabled',
  proxyConfig: 'proxy_config',
  federationEnabled: 'federation_enabled',
  federationAudiences: 'federation_audiences',
  federatedTokenTtlSeconds: 'federated_token_ttl_seconds',
  tokenTtlSeconds: 'token_ttl_seconds',
  apiKeyExpiresAt: 'api_key_expires_at',
  actionApprovalPolicy: 'action_approval_policy',
  addressScreeningPolicy: 'address_screening_policy',
  executionGuardrails: 'execution_guardrails',
  perChainGuardrails: 'per_chain_guardrails',
  txMaxValueEth: 'tx_max_value_eth',
  txDailyLimitEth: 'tx_daily_limit_eth',
  txMaxPerDay: 'tx_max_per_day',
  maxFeePerGasGwei: 'max_fee_per_gas_gwei',
  maxGasLimit: 'max_gas_limit',
  txToAllowlist: 'tx_to_allowlist',
  txAllowedChains: 'tx_allowed_chains',
  eip712DomainAllowlist: 'eip712_domain_allowlist',
  eip712DefaultPolicy: 'eip712_default_policy',
  usdcDailyLimitUsd: 'usdc_daily_limit_usd',
  usdDailyLimitUsd: 'usd_daily_limit_usd',
  environment: 'environment',
  envAutoResolve: 'env_auto_resolve',
  intentsRequireTee: 'intents_require_tee',
  executionRequireTee: 'execution_require_tee',
};

/** Settings of a new agent before the caller's fields apply. */
export const DEFAULT_AGENT_SETTINGS: AgentSettings = {
  scopes: null,
  vaultIds: [],
  intentsApiEnabled: false,
  messageSigningEnabled: false,
  rawSigningEnabled: false,
  executionIntentsEnabled: false,
  proxyEnabled: false,
  proxyConfig: null,
  federationEnabled: false,
  federationAudiences: [],
  federatedTokenTtlSeconds: 900,
  tokenTtlSeconds: 3600,
  apiKeyExpiresAt: null,
  actionApprovalPolicy: null,
  addressScreeningPolicy: { mode: 'off' },
  executionGuardrails: { enforcement: 'log' },
  perChainGuardrails: {},
  txMaxValueEth: null,
  txDailyLimitEth: null,
  txMaxPerDay: null,
  maxFeePerGasGwei: null,
  maxGasLimit: null,
  txToAllowlist: [],
  txAllowedChains: [],
  eip712DomainAllowlist: [],
  eip712DefaultPolicy: 'deny',
  usdcDailyLimitUsd: null,
  usdDailyLimitUsd: null,
  environment: 'production',
  envAutoResolve: false,
  intentsRequireTee: false,
  executionRequireTee: false,
};

/** The settings that can be cleared with null, by their API names. */
export const NULLABLE_SETTINGS: ReadonlyMap<string, NullableSetting> = new Map(
  (Object.keys(DEFAULT_AGENT_SETTINGS) as Array<keyof AgentSettings>)
    .filter((k) => DEFAULT_AGENT_SETTINGS[k] === null)
    .map((k) => [SETTING_NAMES[k], k as NullableSetting]),
);

// Secret-path globs: path characters plus `*` (one segment) and `**` (any number of segments).
const SCOPE = /^[A-Za-z0-9_\-/*.]{1,256}$/;

function refuse(field: string, why: string): never {
  throw new InvalidArgumentError(field, `${field} ${why}`);
}

function oneOf<T extends string>(field: string, value: T | undefined, allowed: readonly string[]): void {
  if (value !== undefined && !allowed.includes(value)) refuse(field, `must be one of ${allowed.join(', ')}`);
}

function intIn(field: string, value: number | undefined, min: number, max: number): void {
  if (value !== undefined && (!Number.isInteger(value) || value < min || value > max))
    refuse(field, `must be an integer from ${min} to ${max}`);
}

/**
 * The rules identity keeps whoever calls it (the gateway checks every field's shape first): a
 * name on create, lengths, ranges, enums, scope patterns, vault ids, and a key expiry in the future.
 * Returns the change with the name trimmed.
 */
export function checkAgentChange(
  change: AgentChange,
  mode: 'create' | 'update',
  now = Date.now(),
): AgentChange {
  const name = change.name?.trim();
  if (mode === 'create' && name === undefined) refuse('name', 'is required');
  if (name !== undefined && (name.length === 0 || name.length > 100))
    refuse('name', 'must be 1 to 100 characters');
  if (change.description !== undefined && change.description.length > 1000)
    refuse('description', 'must be at most 1000 characters');
  if (mode === 'create' && change.isActive !== undefined)
    refuse('is_active', 'is not a field of a new agent');
  const s = change.settings;
  intIn('token_ttl_seconds', s.tokenTtlSeconds, 60, 86400);
  intIn('federated_token_ttl_seconds', s.federatedTokenTtlSeconds, 60, 3600);
  oneOf('environment', s.environment, AGENT_ENVIRONMENTS);
  oneOf('eip712_default_policy', s.eip712DefaultPolicy, EIP712_POLICIES);
  oneOf('address_screening_policy.mode', s.addressScreeningPolicy?.mode, SCREENING_MODES);
  oneOf('execution_guardrails.enforcement', s.executionGuardrails?.enforcement, ENFORCEMENT_MODES);
  s.scopes?.forEach((p, i) => SCOPE.test(p) || refuse(`scopes[${i}]`, 'must be a secret-path pattern'));
  s.vaultIds?.forEach((v, i) => isUuid(v) || refuse(`vault_ids[${i}]`, 'must be a UUID'));
  if (s.actionApprovalPolicy) checkApprovalPolicy(s.actionApprovalPolicy);
  if (s.apiKeyExpiresAt) {
    const at = Date.parse(s.apiKeyExpiresAt);
    if (Number.isNaN(at)) refuse('api_key_expires_at', 'must be an ISO 8601 date-time');
    if (at <= now) refuse('api_key_expires_at', 'must be in the future');
  }
  return name === undefined ? change : { ...change, name };
}

/** The API names of the fields a change sets, sorted: what an audit record of it lists. */
export function changedFieldNames(change: AgentChange): string[] {
  const names = [
    ...(['name', 'description', 'isActive'] as const)
      .filter((k) => change[k] !== undefined)
      .map((k) => (k === 'isActive' ? 'is_active' : k)),
    ...(Object.keys(change.settings) as Array<keyof AgentSettings>).map((k) => SETTING_NAMES[k]),
  ];
  return names.sort();
}

/** Seconds an agent token may live: the agent's TTL, never past the key's expiry (spec §5.5). */
export function agentTokenTtl(s: AgentSettings, now = Date.now()): number {
  if (!s.apiKeyExpiresAt) return s.tokenTtlSeconds;
  const untilExpiry = Math.max(1, Math.floor((Date.parse(s.apiKeyExpiresAt) - now) / 1000));
  return Math.min(s.tokenTtlSeconds, untilExpiry);
}

/** Whether the agent's API key has expired. */
export function agentKeyExpired(s: AgentSettings, now = Date.now()): boolean {
  return s.apiKeyExpiresAt !== null && Date.parse(s.apiKeyExpiresAt) <= now;
}

/**
 * An agent's token access (spec §4.1): its explicit scopes, else the path patterns of its live
 * allow grants, else none; its vaults are those its settings name plus those its grants are on.
 */
export function agentAccess(s: AgentSettings, grants: { scopes: string[]; vaultIds: string[] }): AgentAccess {
  return {
    scopes: s.scopes ?? [...new Set(grants.scopes)],
    vaultIds: [...new Set([...s.vaultIds, ...grants.vaultIds])],
  };
}

/**
 * Whether a settings change may take away something the agent's live tokens carry (their claims:
 * scopes, vault_ids, intents_api_enabled, environment, proxy): then those tokens are revoked at
 * once rather than left to expire. A change that only widens leaves them valid.
 */
export function narrowsTokenClaims(before: AgentSettings, after: AgentSettings): boolean {
  const removed = (a: readonly string[], b: readonly string[]) => a.some((x) => !b.includes(x));
  // null scopes mean "from the grants": a switch either way may narrow.
  if ((before.scopes === null) !== (after.scopes === null)) return true;
  if (before.scopes && after.scopes && removed(before.scopes, after.scopes)) return true;
  if (removed(before.vaultIds, after.vaultIds)) return true;
  if (before.intentsApiEnabled && !after.intentsApiEnabled) return true;
  if (before.environment !== after.environment) return true;
  if (before.proxyEnabled && !after.proxyEnabled) return true;
  return JSON.stringify(before.proxyConfig) !== JSON.stringify(after.proxyConfig);
}

/**
 * The settings that are an agent's guardrails: which signing paths are open to it, whether they
 * need a TEE, what it may sign and spend, and what needs an approval or a screening. SPEC.md §5.9:
 * every edit of one needs a step-up (`agent.guardrails.edit`), whichever way it goes (the gateway
 * challenges on any set, so both sides decide from the body alone).
 */
export const GUARDRAIL_SETTINGS: readonly (keyof AgentSettings)[] = [
  'intentsApiEnabled',
  'messageSigningEnabled',
  'rawSigningEnabled',
  'executionIntentsEnabled',
  'intentsRequireTee',
  'executionRequireTee',
  'actionApprovalPolicy',
  'addressScreeningPolicy',
  'executionGuardrails',
  'perChainGuardrails',
  'txMaxValueEth',
  'txDailyLimitEth',
  'txMaxPerDay',
  'maxFeePerGasGwei',
  'maxGasLimit',
  'txToAllowlist',
  'txAllowedChains',
  'eip712DomainAllowlist',
  'eip712DefaultPolicy',
  'usdcDailyLimitUsd',
  'usdDailyLimitUsd',
];

/** Whether a change sets any guardrail setting (null included: clearing one is an edit too). */
export function touchesGuardrails(settings: Partial<AgentSettings>): boolean {
  return GUARDRAIL_SETTINGS.some((k) => settings[k] !== undefined);
}
