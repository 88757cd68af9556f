import { z } from 'zod';
import { InvalidArgumentError, isUuid } from '@custos/service-kit';

// Secret-path globs: path characters plus `*` (one segment) and `**` (any number of segments).
const SCOPE = /^[A-Za-z0-9_\-/*.]{1,256}$/;
const DECIMAL = /^\d{1,30}(\.\d{1,18})?$/;

/** A non-negative amount, as a JSON number or a decimal string; stored as a decimal string. */
const amount = z
  .union([z.number().nonnegative().finite(), z.string().regex(DECIMAL, 'must be a non-negative decimal')])
  .transform((v) => String(v));

const guardrail = z
  .object({ gas_daily_budget_native: amount.optional() })
  .catchall(z.union([z.string(), z.number(), z.boolean(), z.array(z.string()), z.null()]));

/** The environments an agent can be scoped to (spec §2.4). */
export const AGENT_ENVIRONMENTS = ['production', 'preview', 'development', 'custom'] as const;

/**
 * Every settable agent field of spec §2.4 (and the reference's limits an agent carries), with its
 * rule. Unknown fields are refused, so a typo never passes silently.
 */
const settingsShape = {
  scopes: z.array(z.string().regex(SCOPE, 'must be a secret-path pattern')).max(100).nullable(),
  vault_ids: z.array(z.string().refine((v) => isUuid(v), 'must be a UUID')).max(100),
  intents_api_enabled: z.boolean(),
  message_signing_enabled: z.boolean(),
  raw_signing_enabled: z.boolean(),
  execution_intents_enabled: z.boolean(),
  proxy_enabled: z.boolean(),
  proxy_config: z.record(z.unknown()).nullable(),
  federation_enabled: z.boolean(),
  federation_audiences: z.array(z.string().url('must be a URL')).max(50),
  federated_token_ttl_seconds: z.number().int().min(60).max(3600),
  token_ttl_seconds: z.number().int().min(60).max(86400),
  api_key_expires_at: z
    .string()
    .datetime({ offset: true, message: 'must be an ISO 8601 date-time' })
    .nullable(),
  action_approval_policy: z.record(z.unknown()).nullable(),
  address_screening_policy: z.object({ mode: z.enum(['off', 'deny', 'approve']) }).strict(),
  execution_guardrails: z
    .object({ enforcement: z.enum(['log', 'enforce']).default('log') })
    .catchall(z.unknown()),
  per_chain_guardrails: z.record(z.string().regex(/^[a-z0-9_-]{1,40}$/, 'must be a chain name'), guardrail),
  tx_max_value_eth: amount.nullable(),
  tx_daily_limit_eth: amount.nullable(),
  tx_max_per_day: z.number().int().nonnegative().nullable(),
  max_fee_per_gas_gwei: z.number().nonnegative().finite().nullable(),
  max_gas_limit: z.number().int().nonnegative().nullable(),
  tx_to_allowlist: z.array(z.string().max(128)).max(1000),
  tx_allowed_chains: z.array(z.string().max(40)).max(100),
  eip712_domain_allowlist: z.array(z.string().max(256)).max(1000),
  eip712_default_policy: z.enum(['allow', 'deny']),
  usdc_daily_limit_usd: z.number().nonnegative().finite().nullable(),
  environment: z.enum(AGENT_ENVIRONMENTS),
  env_auto_resolve: z.boolean(),
  intents_require_tee: z.boolean(),
  execution_require_tee: z.boolean(),
};

/** The stored settings of an agent. */
export type AgentSettings = { [K in keyof typeof settingsShape]: z.infer<(typeof settingsShape)[K]> };

/** Settings of a new agent before the caller's fields apply. */
export const DEFAULT_AGENT_SETTINGS: AgentSettings = {
  scopes: null,
  vault_ids: [],
  intents_api_enabled: false,
  message_signing_enabled: false,
  raw_signing_enabled: false,
  execution_intents_enabled: false,
  proxy_enabled: false,
  proxy_config: null,
  federation_enabled: false,
  federation_audiences: [],
  federated_token_ttl_seconds: 900,
  token_ttl_seconds: 3600,
  api_key_expires_at: null,
  action_approval_policy: null,
  address_screening_policy: { mode: 'off' },
  execution_guardrails: { enforcement: 'log' },
  per_chain_guardrails: {},
  tx_max_value_eth: null,
  tx_daily_limit_eth: null,
  tx_max_per_day: null,
  max_fee_per_gas_gwei: null,
  max_gas_limit: null,
  tx_to_allowlist: [],
  tx_allowed_chains: [],
  eip712_domain_allowlist: [],
  eip712_default_policy: 'deny',
  usdc_daily_limit_usd: null,
  environment: 'production',
  env_auto_resolve: false,
  intents_require_tee: false,
  execution_require_tee: false,
};

const nameRule = z.string().trim().min(1, 'is required').max(100, 'must be at most 100 characters');
const descriptionRule = z.string().max(1000, 'must be at most 1000 characters');

/** Fields a caller sends to create or change an agent, validated. */
export interface AgentInput {
  name?: string;
  description?: string;
  isActive?: boolean;
  settings: Partial<AgentSettings>;
}

function fail(field: string, issue: z.ZodIssue): never {
  const path = [field, ...issue.path.map(String)].join('.');
  throw new InvalidArgumentError(path, `${path} ${issue.message.replace(/^Invalid input$/, 'is invalid')}`);
}

/**
 * Validates the fields of a create or update body. Every problem is a 400 that names the field;
 * `null` is accepted only where it clears something (e.g. `usdc_daily_limit_usd: null` = no cap).
 */
export function parseAgentInput(fields: Record<string, unknown>, mode: 'create' | 'update'): AgentInput {
  const input: AgentInput = { settings: {} };
  for (const [field, value] of Object.entries(fields)) {
    if (field === 'name') {
      const r = nameRule.safeParse(value);
      if (!r.success) fail(field, r.error.issues[0]!);
      input.name = r.data;
    } else if (field === 'description') {
      const r = descriptionRule.safeParse(value ?? '');
      if (!r.success) fail(field, r.error.issues[0]!);
      input.description = r.data;
    } else if (field === 'is_active' && mode === 'update') {
      if (typeof value !== 'boolean') throw new InvalidArgumentError(field, `${field} must be a boolean`);
      input.isActive = value;
    } else if (Object.hasOwn(settingsShape, field)) {
      const rule = settingsShape[field as keyof typeof settingsShape];
      const r = rule.safeParse(value);
      if (!r.success) fail(field, r.error.issues[0]!);
      (input.settings as Record<string, unknown>)[field] = r.data;
    } else {
      throw new InvalidArgumentError(field, `${field} is not a field of an agent`);
    }
  }
  if (mode === 'create' && input.name === undefined)
    throw new InvalidArgumentError('name', 'name is required');
  if (input.settings.api_key_expires_at && Date.parse(input.settings.api_key_expires_at) <= Date.now()) {
    throw new InvalidArgumentError('api_key_expires_at', 'api_key_expires_at must be in the future');
  }
  return input;
}

/** The settings stored for an agent: what is stored, over the defaults (new fields get defaults). */
export function effectiveSettings(stored: Record<string, unknown>): AgentSettings {
  return { ...DEFAULT_AGENT_SETTINGS, ...stored } as AgentSettings;
}

/** The access claims of an agent token. */
export interface AgentAccess {
  scopes: string[];
  vaultIds: string[];
}

/**
 * An agent's token access (spec §4.1): its explicit scopes, else the path patterns of its live
 * allow grants, else none; its vaults are those its settings name plus those its grants are on.
 */
export function agentAccess(s: AgentSettings, grants: { scopes: string[]; vaultIds: string[] }): AgentAccess {
  return {
    scopes: s.scopes ?? [...new Set(grants.scopes)],
    vaultIds: [...new Set([...s.vault_ids, ...grants.vaultIds])],
  };
}
