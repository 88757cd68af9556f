import { DEFAULT_AGENT_SETTINGS, SETTING_NAMES } from './agent-fns.js';
import type {
  ActionApprovalPolicy,
  AgentSettings,
  ApprovalCondition,
  ApprovalConditionSet,
  ApprovalRule,
  ChainGuardrail,
} from './agent-types.js';

// The `settings` column keeps an agent's settings as JSON under their API names, as it always has;
// these functions translate between that and AgentSettings. Reading is lenient (rows written
// before a field was typed keep working: what does not fit the type is left out).

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const strings = (v: unknown): string[] | undefined =>
  Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : undefined;
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
/** A stored amount: a decimal string, or a JSON number as rows written before typed contracts hold. */
const amount = (v: unknown): string | undefined =>
  typeof v === 'number' && Number.isFinite(v) ? String(v) : str(v);
const num = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined);

/** Keys of `from` whose value is defined, named by `names`; what a nested stored object holds. */
function pick(from: Record<string, unknown>, names: Record<string, string>): Json {
  const out: Json = {};
  for (const [key, name] of Object.entries(names)) if (from[key] !== undefined) out[name] = from[key];
  return out;
}

/** Reads the keys `names` maps from `from`, translating them to their domain names. */
function unpick(from: Json, names: Record<string, string>): Json {
  const out: Json = {};
  for (const [key, name] of Object.entries(names)) if (from[name] !== undefined) out[key] = from[name];
  return out;
}

const GUARDRAIL_NAMES = {
  maxValue: 'max_value',
  dailyLimit: 'daily_limit',
  toAllowlist: 'to_allowlist',
  gasDailyBudgetNative: 'gas_daily_budget_native',
};
const CONDITION_NAMES = {
  type: 'type',
  thresholdWei: 'threshold_wei',
  thresholdGwei: 'threshold_gwei',
  chains: 'chains',
  addresses: 'addresses',
  selectors: 'selectors',
  thresholdRaw: 'threshold_raw',
  intentTypes: 'intent_types',
  actions: 'actions',
  actionKinds: 'action_kinds',
};
const REQUIREMENT_NAMES = {
  minApprovals: 'min_approvals',
  requiredRoles: 'required_roles',
  perRoleMinimums: 'per_role_minimums',
  requireCredentialTypes: 'require_credential_types',
};

function guardrailFromStored(v: unknown): ChainGuardrail {
  if (!isObject(v)) return {};
  const g: ChainGuardrail = {};
  const maxValue = amount(v['max_value']);
  const dailyLimit = amount(v['daily_limit']);
  const toAllowlist = strings(v['to_allowlist']);
  const gas = amount(v['gas_daily_budget_native']);
  if (maxValue !== undefined) g.maxValue = maxValue;
  if (dailyLimit !== undefined) g.dailyLimit = dailyLimit;
  if (toAllowlist?.length) g.toAllowlist = toAllowlist;
  if (gas !== undefined) g.gasDailyBudgetNative = gas;
  return g;
}

function conditionsFromStored(v: unknown): ApprovalCondition[] {
  return (Array.isArray(v) ? v : [])
    .filter(isObject)
    .map((c) => unpick(c, CONDITION_NAMES) as unknown as ApprovalCondition);
}

/** Stored `skip_when` / `require_when`: a list of `{conditions: [...]}`; sets left empty are dropped. */
function setsFromStored(v: unknown): ApprovalConditionSet[] {
  if (!Array.isArray(v)) return [];
  return v
    .filter(isObject)
    .map((set) => ({ conditions: conditionsFromStored(set['conditions']) }))
    .filter((set) => set.conditions.length > 0);
}

function setsToStored(sets: ApprovalConditionSet[]): Json[] {
  return sets.map((set) => ({
    conditions: set.conditions.map((c) => pick(c as unknown as Json, CONDITION_NAMES)),
  }));
}

function ruleFromStored(v: Json): ApprovalRule {
  const conditions = conditionsFromStored(v['conditions']);
  const rule: ApprovalRule = { conditions, riskTier: num(v['risk_tier']) ?? 1 };
  if (isObject(v['approval'])) {
    rule.approval = unpick(v['approval'], REQUIREMENT_NAMES) as unknown as ApprovalRule['approval'];
  }
  const expiry = num(v['expiry_secs']);
  if (expiry !== undefined) rule.expirySecs = expiry;
  if (typeof v['self_approval_allowed'] === 'boolean') rule.selfApprovalAllowed = v['self_approval_allowed'];
  const skipWhen = setsFromStored(v['skip_when']);
  if (skipWhen.length) rule.skipWhen = skipWhen;
  const requireWhen = setsFromStored(v['require_when']);
  if (requireWhen.length) rule.requireWhen = requireWhen;
  return rule;
}

function policyFromStored(v: unknown): ActionApprovalPolicy | null {
  if (!isObject(v)) return null;
  const rules = Array.isArray(v['rules']) ? v['rules'].filter(isObject) : [];
  return { rules: rules.map(ruleFromStored) };
}

/** The settings of a stored row, over the defaults (settings added since the row was written get them). */
export function settingsFromStored(stored: Json): AgentSettings {
  const out: Json = { ...DEFAULT_AGENT_SETTINGS };
  for (const [key, name] of Object.entries(SETTING_NAMES)) {
    if (stored[name] !== undefined) out[key] = stored[name];
  }
  const s = out as unknown as AgentSettings;
  const screening = isObject(stored['address_screening_policy']) ? stored['address_screening_policy'] : {};
  const execution = isObject(stored['execution_guardrails']) ? stored['execution_guardrails'] : {};
  const chains = isObject(stored['per_chain_guardrails']) ? stored['per_chain_guardrails'] : {};
  return {
    ...s,
    actionApprovalPolicy: policyFromStored(stored['action_approval_policy']),
    addressScreeningPolicy: {
      mode: (str(screening['mode']) ?? 'off') as AgentSettings['addressScreeningPolicy']['mode'],
    },
    executionGuardrails: {
      enforcement: (str(execution['enforcement']) ??
        'log') as AgentSettings['executionGuardrails']['enforcement'],
    },
    perChainGuardrails: Object.fromEntries(
      Object.entries(chains).map(([chain, g]) => [chain, guardrailFromStored(g)]),
    ),
  };
}

/** The JSON stored for settings. */
export function settingsToStored(s: AgentSettings): Json {
  const out: Json = {};
  for (const [key, name] of Object.entries(SETTING_NAMES)) out[name] = (s as unknown as Json)[key];
  out['action_approval_policy'] = s.actionApprovalPolicy && {
    rules: s.actionApprovalPolicy.rules.map((r) => ({
      conditions: r.conditions.map((c) => pick(c as unknown as Json, CONDITION_NAMES)),
      risk_tier: r.riskTier,
      ...(r.approval ? { approval: pick(r.approval as unknown as Json, REQUIREMENT_NAMES) } : {}),
      ...(r.expirySecs !== undefined ? { expiry_secs: r.expirySecs } : {}),
      ...(r.selfApprovalAllowed !== undefined ? { self_approval_allowed: r.selfApprovalAllowed } : {}),
      ...(r.skipWhen?.length ? { skip_when: setsToStored(r.skipWhen) } : {}),
      ...(r.requireWhen?.length ? { require_when: setsToStored(r.requireWhen) } : {}),
    })),
  };
  out['per_chain_guardrails'] = Object.fromEntries(
    Object.entries(s.perChainGuardrails).map(([chain, g]) => [
      chain,
      pick(g as unknown as Json, GUARDRAIL_NAMES),
    ]),
  );
  return out;
}
