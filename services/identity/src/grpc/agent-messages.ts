import type {
  AgentFields,
  Agent as AgentMessage,
  ChainGuardrail as GuardrailMessage,
} from '@custos/proto/custos/identity/v1/agents';
import { storedPolicyMessage, storedPolicyOf } from '@custos/approval-rules';
import { InvalidArgumentError } from '@custos/service-kit';
import { NULLABLE_SETTINGS } from '../agents/agent-fns.js';
import type { Agent, AgentChange, AgentSettings, ChainGuardrail } from '../agents/agent-types.js';

// Maps agents between identity's domain types and the proto messages of agents.proto.

const list = (values: string[]) => ({ values });
const orUndefined = <T>(v: T | null): T | undefined => (v === null ? undefined : v);
/** int64 travels as a decimal string (ts-proto forceLong=string). */
const int64 = (v: number | null | undefined) => (v === null || v === undefined ? undefined : String(v));
const fromInt64 = (v: string | undefined) => (v === undefined ? undefined : Number(v));

function guardrailMessage(g: ChainGuardrail): GuardrailMessage {
  return {
    maxValue: g.maxValue,
    dailyLimit: g.dailyLimit,
    toAllowlist: g.toAllowlist ?? [],
    gasDailyBudgetNative: g.gasDailyBudgetNative,
  };
}

function guardrailOf(m: GuardrailMessage): ChainGuardrail {
  const g: ChainGuardrail = {};
  if (m.maxValue !== undefined) g.maxValue = m.maxValue;
  if (m.dailyLimit !== undefined) g.dailyLimit = m.dailyLimit;
  if (m.toAllowlist.length > 0) g.toAllowlist = m.toAllowlist;
  if (m.gasDailyBudgetNative !== undefined) g.gasDailyBudgetNative = m.gasDailyBudgetNative;
  return g;
}

/** An agent as the proto carries it. */
export function agentMessage(a: Agent): AgentMessage {
  const s = a.settings;
  return {
    id: a.id,
    orgId: a.orgId,
    name: a.name,
    description: a.description,
    authMethod: 'api_key',
    isActive: a.isActive,
    createdBy: a.createdBy,
    createdAt: a.createdAt.toISOString(),
    updatedAt: a.updatedAt.toISOString(),
    lastActiveAt: a.lastActiveAt?.toISOString(),
    scopes: s.scopes ? list(s.scopes) : undefined,
    vaultIds: s.vaultIds,
    intentsApiEnabled: s.intentsApiEnabled,
    messageSigningEnabled: s.messageSigningEnabled,
    rawSigningEnabled: s.rawSigningEnabled,
    executionIntentsEnabled: s.executionIntentsEnabled,
    proxyEnabled: s.proxyEnabled,
    proxyConfig: orUndefined(s.proxyConfig),
    federationEnabled: s.federationEnabled,
    federationAudiences: s.federationAudiences,
    federatedTokenTtlSeconds: s.federatedTokenTtlSeconds,
    tokenTtlSeconds: s.tokenTtlSeconds,
    apiKeyExpiresAt: orUndefined(s.apiKeyExpiresAt),
    actionApprovalPolicy: s.actionApprovalPolicy ? storedPolicyMessage(s.actionApprovalPolicy) : undefined,
    addressScreeningPolicy: s.addressScreeningPolicy,
    executionGuardrails: s.executionGuardrails,
    perChainGuardrails: Object.fromEntries(
      Object.entries(s.perChainGuardrails).map(([chain, g]) => [chain, guardrailMessage(g)]),
    ),
    txMaxValueEth: orUndefined(s.txMaxValueEth),
    txDailyLimitEth: orUndefined(s.txDailyLimitEth),
    txMaxPerDay: int64(s.txMaxPerDay),
    maxFeePerGasGwei: orUndefined(s.maxFeePerGasGwei),
    maxGasLimit: int64(s.maxGasLimit),
    txToAllowlist: s.txToAllowlist,
    txAllowedChains: s.txAllowedChains,
    eip712DomainAllowlist: s.eip712DomainAllowlist,
    eip712DefaultPolicy: s.eip712DefaultPolicy,
    usdcDailyLimitUsd: orUndefined(s.usdcDailyLimitUsd),
    usdDailyLimitUsd: orUndefined(s.usdDailyLimitUsd),
    environment: s.environment,
    envAutoResolve: s.envAutoResolve,
    intentsRequireTee: s.intentsRequireTee,
    executionRequireTee: s.executionRequireTee,
  };
}

/**
 * The change a create or update asks for: the fields that are set, and null for each nullable
 * field named in `cleared_fields` (the description clears to empty).
 */
export function agentChangeOf(f: AgentFields | undefined): AgentChange {
  if (!f) return { settings: {} };
  const s: Partial<Record<keyof AgentSettings, unknown>> = {
    scopes: f.scopes?.values,
    vaultIds: f.vaultIds?.values,
    intentsApiEnabled: f.intentsApiEnabled,
    messageSigningEnabled: f.messageSigningEnabled,
    rawSigningEnabled: f.rawSigningEnabled,
    executionIntentsEnabled: f.executionIntentsEnabled,
    proxyEnabled: f.proxyEnabled,
    proxyConfig: f.proxyConfig,
    federationEnabled: f.federationEnabled,
    federationAudiences: f.federationAudiences?.values,
    federatedTokenTtlSeconds: f.federatedTokenTtlSeconds,
    tokenTtlSeconds: f.tokenTtlSeconds,
    apiKeyExpiresAt: f.apiKeyExpiresAt,
    actionApprovalPolicy: f.actionApprovalPolicy && storedPolicyOf(f.actionApprovalPolicy),
    addressScreeningPolicy: f.addressScreeningPolicy,
    executionGuardrails: f.executionGuardrails,
    perChainGuardrails:
      f.perChainGuardrails &&
      Object.fromEntries(Object.entries(f.perChainGuardrails.chains).map(([c, g]) => [c, guardrailOf(g)])),
    txMaxValueEth: f.txMaxValueEth,
    txDailyLimitEth: f.txDailyLimitEth,
    txMaxPerDay: fromInt64(f.txMaxPerDay),
    maxFeePerGasGwei: f.maxFeePerGasGwei,
    maxGasLimit: fromInt64(f.maxGasLimit),
    txToAllowlist: f.txToAllowlist?.values,
    txAllowedChains: f.txAllowedChains?.values,
    eip712DomainAllowlist: f.eip712DomainAllowlist?.values,
    eip712DefaultPolicy: f.eip712DefaultPolicy,
    usdcDailyLimitUsd: f.usdcDailyLimitUsd,
    usdDailyLimitUsd: f.usdDailyLimitUsd,
    environment: f.environment,
    envAutoResolve: f.envAutoResolve,
    intentsRequireTee: f.intentsRequireTee,
    executionRequireTee: f.executionRequireTee,
  };
  const settings = Object.fromEntries(Object.entries(s).filter(([, v]) => v !== undefined));
  let description = f.description;
  for (const name of f.clearedFields) {
    if (name === 'description') description = '';
    else {
      const key = NULLABLE_SETTINGS.get(name);
      if (!key) throw new InvalidArgumentError(name, `${name} cannot be null`);
      settings[key] = null;
    }
  }
  return {
    ...(f.name !== undefined ? { name: f.name } : {}),
    ...(description !== undefined ? { description } : {}),
    ...(f.isActive !== undefined ? { isActive: f.isActive } : {}),
    settings: settings as Partial<AgentSettings>,
  };
}
