import { z } from 'zod/v4';
import type {
  ActionApprovalPolicy,
  Agent,
  AgentFields,
  ApprovalCondition,
  ApprovalConditionSet,
  ApprovalRule,
} from '@custos/proto/custos/identity/v1/agents';
import { InvalidArgumentError, isUuid } from '@custos/service-kit';
import { bodyOf, dateTime, idParam, jsonObject } from './schemas.js';

// Agents as HTTP shows them (spec §2.4 and the reference's AgentResponse). Amounts are accepted as
// JSON numbers or decimal strings and answered as strings; a nullable field sent as null is cleared.

const DECIMAL = /^\d{1,30}(\.\d{1,18})?$/;
const amount = z
  .union([z.number().nonnegative(), z.string().regex(DECIMAL)], { error: 'must be a non-negative decimal' })
  .transform((v) => String(v));
const strings = (maxItems: number, maxLength: number) => z.array(z.string().max(maxLength)).max(maxItems);
const uuidString = z.string().refine((v) => isUuid(v), 'must be a UUID');

const ChainGuardrail = z.strictObject({
  max_value: amount.optional(),
  daily_limit: amount.optional(),
  to_allowlist: strings(1000, 128).optional(),
  gas_daily_budget_native: amount.optional(),
});

const list = (name: string) => z.array(z.string().max(256)).max(1000).describe(`\`${name}\` values`);
const ApprovalConditionSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('value_above'),
    threshold_wei: z
      .string()
      .regex(/^\d{1,78}$/, 'must be a decimal integer')
      .optional(),
    threshold_gwei: z.number().int().nonnegative().optional(),
  }),
  z.strictObject({ type: z.literal('chain_in'), chains: list('chain') }),
  z.strictObject({ type: z.literal('to_address_in'), addresses: list('address') }),
  z.strictObject({ type: z.literal('function_selector_in'), selectors: list('selector') }),
  z.strictObject({
    type: z.literal('erc20_amount_above'),
    threshold_raw: z.string().regex(/^\d{1,78}$/, 'must be a decimal integer'),
  }),
  z.strictObject({ type: z.literal('intent_type_in'), intent_types: list('intent type') }),
  z.strictObject({ type: z.literal('action_in'), actions: list('action') }),
  z.strictObject({ type: z.literal('action_kind_in'), action_kinds: list('action kind') }),
  z.strictObject({ type: z.literal('always') }),
]);
/**
 * The reference's FlatConditionSet (skip_when / require_when entries): each field present is one
 * condition, all must match; `always: true` matches whatever else. Carried as an
 * ApprovalConditionSet (value_above, in gwei, as a `value_above` condition's threshold_gwei).
 */
const FlatConditionSetSchema = z
  .strictObject({
    value_above: z
      .string()
      .regex(/^\d{1,16}$/, 'must be a whole number of gwei as a decimal string')
      .refine((v) => Number(v) <= Number.MAX_SAFE_INTEGER, 'must be at most 9007199254740991 gwei')
      .optional()
      .describe('Native value threshold in gwei (numeric string)'),
    chain_in: list('chain').optional(),
    to_address_in: list('address').optional(),
    function_selector_in: list('selector').optional(),
    erc20_amount_above: z
      .string()
      .regex(/^\d{1,78}$/, 'must be a decimal integer')
      .optional()
      .describe('ERC-20 raw token amount threshold (numeric string)'),
    intent_type_in: list('intent type').optional(),
    always: z.boolean().optional().describe('When true, this entry always matches'),
    action_in: list('action').optional(),
    action_kind_in: list('action kind').optional(),
  })
  .refine((set) => Object.entries(set).some(([k, v]) => v !== undefined && (k !== 'always' || v === true)), {
    message: 'must name at least one condition (or always: true)',
  });
type FlatConditionSet = z.infer<typeof FlatConditionSetSchema>;
/** The org roles a consensus can ask for. */
const OrgRole = z.enum(['owner', 'admin', 'member']);
const conditionSets = z.array(FlatConditionSetSchema).max(20);

/** The largest approval rule, in bytes of its JSON (as identity counts it). */
export const MAX_RULE_JSON_BYTES = 32 * 1024;

/** The fields of an approval rule (DECISIONS.md, the reference's consensus vocabulary). */
const approvalRuleShape = {
  conditions: z.array(ApprovalConditionSchema).min(1).max(50),
  risk_tier: z.number().int().min(1).max(3),
  approval: z
    .strictObject({
      min_approvals: z.number().int().min(1).max(100),
      required_roles: z.array(OrgRole).max(3).optional(),
      per_role_minimums: z.partialRecord(OrgRole, z.number().int().min(1).max(100)).optional(),
      // What a vote can prove today: a password or a TOTP code sent as X-Auth-Confirm.
      require_credential_types: z.array(z.enum(['password', 'totp'])).optional(),
    })
    .superRefine((a, ctx) => {
      // A minimum for a role that may not vote could never be met.
      if (!a.required_roles?.length) return;
      for (const role of Object.keys(a.per_role_minimums ?? {})) {
        if (!a.required_roles.includes(role as z.infer<typeof OrgRole>)) {
          ctx.addIssue({
            code: 'custom',
            path: ['per_role_minimums', role],
            message: 'names a role that is not in required_roles',
          });
        }
      }
    })
    .optional(),
  expiry_secs: z.number().int().min(60).max(2_592_000).optional(),
  self_approval_allowed: z
    .boolean()
    .optional()
    .describe("Whether the agent's creator may vote on its approvals (default false)"),
  skip_when: conditionSets
    .optional()
    .describe('The rule does not apply when every condition of any entry matches'),
  require_when: conditionSets
    .optional()
    .describe('When set, the rule applies only when every condition of some entry matches'),
};

/** The checks of a rule across its fields. */
function refineRule(
  r: {
    risk_tier?: number | undefined;
    approval?: { require_credential_types?: string[] | undefined } | undefined;
  },
  ctx: { addIssue: (issue: { code: 'custom'; path: PropertyKey[]; message: string }) => void },
): void {
  // A tier-3 vote proves a TOTP code: a rule asking only for other types could never pass.
  const types = r.approval?.require_credential_types;
  if (r.risk_tier === 3 && types?.length && !types.includes('totp')) {
    ctx.addIssue({
      code: 'custom',
      path: ['approval', 'require_credential_types'],
      message: 'must include totp at risk_tier 3 (a tier-3 decision is proved with a TOTP code)',
    });
  }
  // The matching rule travels with each approval request and approvals refuses one over
  // 64 KiB: a larger rule would fail every action it matches (identity checks the same).
  if (Buffer.byteLength(JSON.stringify(r)) > MAX_RULE_JSON_BYTES) {
    ctx.addIssue({
      code: 'custom',
      path: [],
      message: `must be at most ${MAX_RULE_JSON_BYTES} bytes of JSON (the rule travels with each approval request)`,
    });
  }
}

export const ApprovalRuleSchema = z.strictObject(approvalRuleShape).superRefine(refineRule);
type ApprovalRuleBody = z.infer<typeof ApprovalRuleSchema>;

const ApprovalPolicySchema = z.strictObject({ rules: z.array(ApprovalRuleSchema).max(50) });

/**
 * The reference's ConsensusTrigger on a vault policy whose principal is an agent (DECISIONS.md):
 * an approval rule whose `approval` is required and whose `risk_tier` defaults to 1. `deep_inspect`
 * (conditions read inside multicall and Safe wrappers) is not built: `true` is refused rather than
 * silently ignored.
 */
export const ConsensusTriggerSchema = z
  .strictObject({
    ...approvalRuleShape,
    risk_tier: approvalRuleShape.risk_tier.default(1).describe('1 to 3; default 1'),
    approval: approvalRuleShape.approval.unwrap(),
    deep_inspect: z
      .boolean()
      .refine(
        (v) => !v,
        'is not supported: conditions are read on the outer call only; send false or omit it',
      )
      .optional()
      .describe('Only false: wrapped inner calls are not inspected'),
  })
  .superRefine(refineRule)
  .transform(({ deep_inspect: _deep, ...rule }) => rule);

/** Every setting of an agent; in a body each is optional, and those that are nullable take null. */
const settings = {
  scopes: z
    .array(z.string().regex(/^[A-Za-z0-9_\-/*.]{1,256}$/, 'must be a secret-path pattern'))
    .max(100)
    .nullable()
    .describe('Secret-path patterns; null: from the agent’s grants'),
  vault_ids: z.array(uuidString).max(100),
  intents_api_enabled: z.boolean(),
  message_signing_enabled: z.boolean(),
  raw_signing_enabled: z.boolean(),
  execution_intents_enabled: z.boolean(),
  proxy_enabled: z.boolean(),
  proxy_config: jsonObject.nullable(),
  federation_enabled: z.boolean(),
  federation_audiences: z.array(z.url({ error: 'must be a URL' })).max(50),
  federated_token_ttl_seconds: z.number().int().min(60).max(3600),
  token_ttl_seconds: z.number().int().min(60).max(86400),
  api_key_expires_at: z.iso
    .datetime({ offset: true, error: 'must be an ISO 8601 date-time' })
    .nullable()
    .describe('Must be in the future'),
  action_approval_policy: ApprovalPolicySchema.nullable(),
  address_screening_policy: z.strictObject({ mode: z.enum(['off', 'deny', 'approve']) }),
  execution_guardrails: z.strictObject({ enforcement: z.enum(['log', 'approve', 'enforce']).default('log') }),
  per_chain_guardrails: z.record(
    z.string().regex(/^[a-z0-9_-]{1,40}$/, 'must be a chain name'),
    ChainGuardrail,
  ),
  tx_max_value_eth: amount.nullable(),
  tx_daily_limit_eth: amount.nullable(),
  // DECISIONS.md: the reference's names, the `_eth` ones accepted as aliases (both kept).
  tx_max_value: amount.nullable().describe('Per transaction, native major units; same as tx_max_value_eth'),
  tx_daily_limit: amount
    .nullable()
    .describe('Per UTC day over transactions, native major units; same as tx_daily_limit_eth'),
  tx_max_per_day: z.number().int().nonnegative().nullable(),
  max_fee_per_gas_gwei: z.number().nonnegative().nullable(),
  max_gas_limit: z.number().int().nonnegative().nullable(),
  tx_to_allowlist: strings(1000, 128),
  tx_allowed_chains: strings(100, 40),
  eip712_domain_allowlist: strings(1000, 256),
  eip712_default_policy: z.enum(['allow', 'deny']),
  usdc_daily_limit_usd: z.number().nonnegative().nullable().describe('null: no cap'),
  usd_daily_limit_usd: z
    .number()
    .nonnegative()
    .nullable()
    .describe('All spend of a UTC day over all chains, valued in USD (docs/guardrails.md); null: no cap'),
  environment: z.enum(['production', 'preview', 'development', 'custom']),
  env_auto_resolve: z.boolean(),
  intents_require_tee: z.boolean(),
  execution_require_tee: z.boolean(),
};
type Settings = { [K in keyof typeof settings]?: z.output<(typeof settings)[K]> };

const optionalSettings = Object.fromEntries(Object.entries(settings).map(([k, v]) => [k, v.optional()])) as {
  [K in keyof typeof settings]: z.ZodOptional<(typeof settings)[K]>;
};
const name = z.string().trim().min(1).max(100);
const description = z.string().max(1000).nullable();
export const CreateAgentBody = bodyOf({ name, description: description.optional(), ...optionalSettings });
/**
 * The settings that are an agent's guardrails (which signing paths are open and whether they need
 * a TEE, what it may sign and spend, what needs approval or screening): an update that sets one,
 * either way, needs the step-up `agent.guardrails.edit` (SPEC.md §5.9). Identity's
 * GUARDRAIL_SETTINGS is the same list.
 */
export const GUARDRAIL_FIELDS = [
  'intents_api_enabled',
  'message_signing_enabled',
  'raw_signing_enabled',
  'execution_intents_enabled',
  'intents_require_tee',
  'execution_require_tee',
  'action_approval_policy',
  'address_screening_policy',
  'execution_guardrails',
  'per_chain_guardrails',
  'tx_max_value_eth',
  'tx_daily_limit_eth',
  'tx_max_value',
  'tx_daily_limit',
  'tx_max_per_day',
  'max_fee_per_gas_gwei',
  'max_gas_limit',
  'tx_to_allowlist',
  'tx_allowed_chains',
  'eip712_domain_allowlist',
  'eip712_default_policy',
  'usdc_daily_limit_usd',
  'usd_daily_limit_usd',
] as const satisfies readonly (keyof typeof settings)[];

/** Whether an agent update's body sets a guardrail (null included: clearing one is an edit). */
export function touchesGuardrails(body: Record<string, unknown>): boolean {
  return GUARDRAIL_FIELDS.some((f) => body[f] !== undefined);
}

export const UpdateAgentBody = bodyOf({
  name: name.optional(),
  description: description.optional(),
  is_active: z.boolean().optional(),
  ...optionalSettings,
  approval_id: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe(
      'The approved `policy_change` approval (`pending_approval_id` of the 202) of exactly this guardrail change: applies it, once',
    ),
});

const GuardrailJson = z.record(z.string(), z.unknown());

/** The 202 of a guardrail edit that waits for an approval (nothing was applied). */
export const GuardrailChangePendingResponse = z.object({
  status: z.literal('pending_approval'),
  pending_approval_id: z.string(),
  approval_id: z.string().describe('The same id as pending_approval_id'),
  agent_id: z.string(),
  change: z.enum(['widen', 'mixed']),
  change_hash: z.string(),
  before: GuardrailJson,
  after: GuardrailJson,
});

/** One applied edit of an agent's guardrail fields. */
export const GuardrailRevisionResponse = z.object({
  id: z.string(),
  agent_id: z.string(),
  actor_id: z.string(),
  change: z.enum(['same', 'narrow', 'widen', 'mixed']),
  before: GuardrailJson,
  after: GuardrailJson,
  approval_id: z.string().nullable(),
  created_at: dateTime,
});

export const AgentResponse = z.object({
  id: z.string(),
  org_id: z.string(),
  name: z.string(),
  description: z.string(),
  auth_method: z.literal('api_key'),
  is_active: z.boolean(),
  created_by: z.string(),
  created_at: dateTime,
  updated_at: dateTime,
  last_active_at: dateTime.nullable(),
  ...settings,
  tx_max_value_eth: z.string().nullable(),
  tx_daily_limit_eth: z.string().nullable(),
  tx_max_value: z.string().nullable(),
  tx_daily_limit: z.string().nullable(),
  per_chain_guardrails: z.record(z.string(), ChainGuardrail.extend({ max_value: z.string().optional() })),
  execution_guardrails: z.object({ enforcement: z.enum(['log', 'approve', 'enforce']) }),
  tx_spent_today_by_chain: z
    .record(z.string(), z.string())
    .optional()
    .describe(
      'Native value spent today (UTC) by chain family (`evm`, `bitcoin` …) in major units, as the guardrails count it; on GET only',
    ),
  tx_count_today: z.number().int().optional().describe('Transactions counted today (UTC); on GET only'),
});
type AgentJson = z.infer<typeof AgentResponse>;

export const AgentSelfResponse = AgentResponse.pick({
  id: true,
  org_id: true,
  name: true,
  description: true,
  is_active: true,
  intents_api_enabled: true,
  environment: true,
  created_by: true,
  created_at: true,
  last_active_at: true,
}).extend({
  scopes: z.array(z.string()).describe('Explicit scopes; empty when they come from grants'),
  expires_at: dateTime.nullable().describe('When the agent’s API key expires'),
});

export const AgentParams = z.object({ agent_id: idParam });

const stringList = (values: string[] | undefined) => values && { values };
const int64 = (v: number | null | undefined) => (v === null || v === undefined ? undefined : String(v));

function conditionJson(c: ApprovalCondition): Record<string, unknown> {
  const out: Record<string, unknown> = { type: c.type };
  if (c.thresholdWei !== undefined) out['threshold_wei'] = c.thresholdWei;
  if (c.thresholdGwei !== undefined) out['threshold_gwei'] = Number(c.thresholdGwei);
  if (c.thresholdRaw !== undefined) out['threshold_raw'] = c.thresholdRaw;
  const lists = [
    ['chains', c.chains],
    ['addresses', c.addresses],
    ['selectors', c.selectors],
    ['intent_types', c.intentTypes],
    ['actions', c.actions],
    ['action_kinds', c.actionKinds],
  ] as const;
  for (const [key, v] of lists) if (v.length > 0) out[key] = v;
  return out;
}

const noList = { chains: [], addresses: [], selectors: [], intentTypes: [], actions: [], actionKinds: [] };

/** A FlatConditionSet as the proto carries it: one condition per field given. */
export function conditionSetMessage(set: FlatConditionSet): ApprovalConditionSet {
  const conditions: ApprovalCondition[] = [];
  const add = (type: string, fields: Partial<ApprovalCondition>) =>
    conditions.push({ ...noList, type, ...fields });
  if (set.value_above !== undefined) add('value_above', { thresholdGwei: set.value_above });
  if (set.chain_in !== undefined) add('chain_in', { chains: set.chain_in });
  if (set.to_address_in !== undefined) add('to_address_in', { addresses: set.to_address_in });
  if (set.function_selector_in !== undefined)
    add('function_selector_in', { selectors: set.function_selector_in });
  if (set.erc20_amount_above !== undefined)
    add('erc20_amount_above', { thresholdRaw: set.erc20_amount_above });
  if (set.intent_type_in !== undefined) add('intent_type_in', { intentTypes: set.intent_type_in });
  if (set.action_in !== undefined) add('action_in', { actions: set.action_in });
  if (set.action_kind_in !== undefined) add('action_kind_in', { actionKinds: set.action_kind_in });
  if (set.always === true) add('always', {});
  return { conditions };
}

/** An ApprovalConditionSet back in the FlatConditionSet shape. */
export function conditionSetJson(set: ApprovalConditionSet): FlatConditionSet {
  const out: FlatConditionSet = {};
  for (const c of set.conditions) {
    switch (c.type) {
      case 'value_above':
        // Sets made here carry gwei; a wei threshold is shown in gwei when it is whole gwei.
        if (c.thresholdGwei !== undefined) out.value_above = c.thresholdGwei;
        else if (c.thresholdWei !== undefined && /^\d+$/.test(c.thresholdWei))
          out.value_above = String(BigInt(c.thresholdWei) / 1_000_000_000n);
        break;
      case 'chain_in':
        out.chain_in = c.chains;
        break;
      case 'to_address_in':
        out.to_address_in = c.addresses;
        break;
      case 'function_selector_in':
        out.function_selector_in = c.selectors;
        break;
      case 'erc20_amount_above':
        if (c.thresholdRaw !== undefined) out.erc20_amount_above = c.thresholdRaw;
        break;
      case 'intent_type_in':
        out.intent_type_in = c.intentTypes;
        break;
      case 'action_in':
        out.action_in = c.actions;
        break;
      case 'action_kind_in':
        out.action_kind_in = c.actionKinds;
        break;
      case 'always':
        out.always = true;
        break;
    }
  }
  return out;
}

/** An approval rule in its HTTP shape. */
export function approvalRuleBody(r: ApprovalRule): ApprovalRuleBody {
  return {
    conditions: r.conditions.map(conditionJson) as z.infer<typeof ApprovalConditionSchema>[],
    risk_tier: r.riskTier,
    ...(r.approval
      ? {
          approval: {
            min_approvals: r.approval.minApprovals,
            // Identity and policy keep only what the schema takes (roles, credential types): cast back.
            ...(r.approval.requiredRoles.length
              ? { required_roles: r.approval.requiredRoles as Array<z.infer<typeof OrgRole>> }
              : {}),
            ...(Object.keys(r.approval.perRoleMinimums).length
              ? {
                  per_role_minimums: r.approval.perRoleMinimums as Partial<
                    Record<z.infer<typeof OrgRole>, number>
                  >,
                }
              : {}),
            ...(r.approval.requireCredentialTypes.length
              ? { require_credential_types: r.approval.requireCredentialTypes as Array<'password' | 'totp'> }
              : {}),
          },
        }
      : {}),
    ...(r.expirySecs !== undefined ? { expiry_secs: Number(r.expirySecs) } : {}),
    ...(r.selfApprovalAllowed !== undefined ? { self_approval_allowed: r.selfApprovalAllowed } : {}),
    ...(r.skipWhen.length ? { skip_when: r.skipWhen.map(conditionSetJson) } : {}),
    ...(r.requireWhen.length ? { require_when: r.requireWhen.map(conditionSetJson) } : {}),
  };
}

/** An approval rule of a request body as the proto carries it. */
export function approvalRuleMessage(r: ApprovalRuleBody): ApprovalRule {
  const c = (x: (typeof r.conditions)[number]) => x as Partial<Record<string, unknown>>;
  return {
    conditions: r.conditions.map((x) => ({
      type: x.type,
      thresholdWei: c(x)['threshold_wei'] as string | undefined,
      thresholdGwei: int64(c(x)['threshold_gwei'] as number | undefined),
      chains: (c(x)['chains'] as string[] | undefined) ?? [],
      addresses: (c(x)['addresses'] as string[] | undefined) ?? [],
      selectors: (c(x)['selectors'] as string[] | undefined) ?? [],
      thresholdRaw: c(x)['threshold_raw'] as string | undefined,
      intentTypes: (c(x)['intent_types'] as string[] | undefined) ?? [],
      actions: (c(x)['actions'] as string[] | undefined) ?? [],
      actionKinds: (c(x)['action_kinds'] as string[] | undefined) ?? [],
    })),
    riskTier: r.risk_tier,
    approval: r.approval && {
      minApprovals: r.approval.min_approvals,
      requiredRoles: r.approval.required_roles ?? [],
      perRoleMinimums: r.approval.per_role_minimums ?? {},
      requireCredentialTypes: r.approval.require_credential_types ?? [],
    },
    expirySecs: int64(r.expiry_secs),
    selfApprovalAllowed: r.self_approval_allowed,
    skipWhen: (r.skip_when ?? []).map(conditionSetMessage),
    requireWhen: (r.require_when ?? []).map(conditionSetMessage),
  };
}

const policyJson = (p: ActionApprovalPolicy): AgentJson['action_approval_policy'] => ({
  rules: p.rules.map(approvalRuleBody),
});

const policyMessage = (p: NonNullable<Settings['action_approval_policy']>): ActionApprovalPolicy => ({
  rules: p.rules.map(approvalRuleMessage),
});

/** The API names of the limits that have an alias, and the name identity knows them by. */
const ALIASES = { tx_max_value: 'tx_max_value_eth', tx_daily_limit: 'tx_daily_limit_eth' } as const;

/**
 * A limit sent under either of its names (`tx_max_value` or `tx_max_value_eth`): the same value
 * under both is fine, two different ones are a 400 naming the alias.
 */
function aliased(b: Settings, alias: keyof typeof ALIASES): string | null | undefined {
  const main = b[ALIASES[alias]];
  const other = b[alias];
  if (main !== undefined && other !== undefined && main !== other)
    throw new InvalidArgumentError(
      alias,
      `${alias} and ${ALIASES[alias]} name the same limit: send one, or the same value`,
    );
  return main !== undefined ? main : other;
}

/** The typed fields of a create or update body; every null goes to `cleared_fields`. */
export function agentFields(
  b: Settings & { name?: string; description?: string | null; is_active?: boolean },
): AgentFields {
  const txMaxValue = aliased(b, 'tx_max_value');
  const txDailyLimit = aliased(b, 'tx_daily_limit');
  return {
    name: b.name,
    description: b.description ?? undefined,
    isActive: b.is_active,
    scopes: stringList(b.scopes ?? undefined),
    vaultIds: stringList(b.vault_ids),
    intentsApiEnabled: b.intents_api_enabled,
    messageSigningEnabled: b.message_signing_enabled,
    rawSigningEnabled: b.raw_signing_enabled,
    executionIntentsEnabled: b.execution_intents_enabled,
    proxyEnabled: b.proxy_enabled,
    proxyConfig: b.proxy_config ?? undefined,
    federationEnabled: b.federation_enabled,
    federationAudiences: stringList(b.federation_audiences),
    federatedTokenTtlSeconds: b.federated_token_ttl_seconds,
    tokenTtlSeconds: b.token_ttl_seconds,
    apiKeyExpiresAt: b.api_key_expires_at ?? undefined,
    actionApprovalPolicy: b.action_approval_policy ? policyMessage(b.action_approval_policy) : undefined,
    addressScreeningPolicy: b.address_screening_policy,
    executionGuardrails: b.execution_guardrails,
    perChainGuardrails: b.per_chain_guardrails && {
      chains: Object.fromEntries(
        Object.entries(b.per_chain_guardrails).map(([chain, g]) => [
          chain,
          {
            maxValue: g.max_value,
            dailyLimit: g.daily_limit,
            toAllowlist: g.to_allowlist ?? [],
            gasDailyBudgetNative: g.gas_daily_budget_native,
          },
        ]),
      ),
    },
    txMaxValueEth: txMaxValue ?? undefined,
    txDailyLimitEth: txDailyLimit ?? undefined,
    txMaxPerDay: int64(b.tx_max_per_day),
    maxFeePerGasGwei: b.max_fee_per_gas_gwei ?? undefined,
    maxGasLimit: int64(b.max_gas_limit),
    txToAllowlist: stringList(b.tx_to_allowlist),
    txAllowedChains: stringList(b.tx_allowed_chains),
    eip712DomainAllowlist: stringList(b.eip712_domain_allowlist),
    eip712DefaultPolicy: b.eip712_default_policy,
    usdcDailyLimitUsd: b.usdc_daily_limit_usd ?? undefined,
    usdDailyLimitUsd: b.usd_daily_limit_usd ?? undefined,
    environment: b.environment,
    envAutoResolve: b.env_auto_resolve,
    intentsRequireTee: b.intents_require_tee,
    executionRequireTee: b.execution_require_tee,
    clearedFields: [
      ...new Set(
        Object.entries(b)
          .filter(([, v]) => v === null)
          .map(([k]) => (k in ALIASES ? ALIASES[k as keyof typeof ALIASES] : k)),
      ),
    ],
  };
}

/** The HTTP view of an agent, keys in the order agents have always been shown in. */
export function agentBody(a: Agent | undefined): AgentJson {
  const n = <T>(v: T | undefined) => (v === undefined ? null : v);
  return {
    id: a?.id ?? '',
    org_id: a?.orgId ?? '',
    name: a?.name ?? '',
    description: a?.description ?? '',
    auth_method: 'api_key',
    is_active: a?.isActive ?? false,
    created_by: a?.createdBy ?? '',
    created_at: a?.createdAt ?? '',
    updated_at: a?.updatedAt ?? '',
    last_active_at: n(a?.lastActiveAt),
    scopes: a?.scopes ? a.scopes.values : null,
    vault_ids: a?.vaultIds ?? [],
    intents_api_enabled: a?.intentsApiEnabled ?? false,
    message_signing_enabled: a?.messageSigningEnabled ?? false,
    raw_signing_enabled: a?.rawSigningEnabled ?? false,
    execution_intents_enabled: a?.executionIntentsEnabled ?? false,
    proxy_enabled: a?.proxyEnabled ?? false,
    proxy_config: n(a?.proxyConfig),
    federation_enabled: a?.federationEnabled ?? false,
    federation_audiences: a?.federationAudiences ?? [],
    federated_token_ttl_seconds: a?.federatedTokenTtlSeconds ?? 0,
    token_ttl_seconds: a?.tokenTtlSeconds ?? 0,
    api_key_expires_at: n(a?.apiKeyExpiresAt),
    action_approval_policy: a?.actionApprovalPolicy ? policyJson(a.actionApprovalPolicy) : null,
    address_screening_policy: {
      mode: (a?.addressScreeningPolicy?.mode ?? 'off') as 'off' | 'deny' | 'approve',
    },
    execution_guardrails: {
      enforcement: (a?.executionGuardrails?.enforcement ?? 'log') as 'log' | 'enforce',
    },
    per_chain_guardrails: Object.fromEntries(
      Object.entries(a?.perChainGuardrails ?? {}).map(([chain, g]) => [
        chain,
        {
          ...(g.maxValue !== undefined ? { max_value: g.maxValue } : {}),
          ...(g.dailyLimit !== undefined ? { daily_limit: g.dailyLimit } : {}),
          ...(g.toAllowlist.length > 0 ? { to_allowlist: g.toAllowlist } : {}),
          ...(g.gasDailyBudgetNative !== undefined
            ? { gas_daily_budget_native: g.gasDailyBudgetNative }
            : {}),
        },
      ]),
    ),
    tx_max_value_eth: n(a?.txMaxValueEth),
    tx_daily_limit_eth: n(a?.txDailyLimitEth),
    tx_max_value: n(a?.txMaxValueEth),
    tx_daily_limit: n(a?.txDailyLimitEth),
    tx_max_per_day: a?.txMaxPerDay === undefined ? null : Number(a.txMaxPerDay),
    max_fee_per_gas_gwei: n(a?.maxFeePerGasGwei),
    max_gas_limit: a?.maxGasLimit === undefined ? null : Number(a.maxGasLimit),
    tx_to_allowlist: a?.txToAllowlist ?? [],
    tx_allowed_chains: a?.txAllowedChains ?? [],
    eip712_domain_allowlist: a?.eip712DomainAllowlist ?? [],
    eip712_default_policy: (a?.eip712DefaultPolicy ?? 'deny') as 'allow' | 'deny',
    usdc_daily_limit_usd: n(a?.usdcDailyLimitUsd),
    usd_daily_limit_usd: n(a?.usdDailyLimitUsd),
    environment: (a?.environment ?? 'production') as AgentJson['environment'],
    env_auto_resolve: a?.envAutoResolve ?? false,
    intents_require_tee: a?.intentsRequireTee ?? false,
    execution_require_tee: a?.executionRequireTee ?? false,
  };
}

/** What an agent sees of itself (`GET /v1/agents/me`, the reference's AgentSelfResponse). */
export function agentSelfBody(a: Agent | undefined): z.infer<typeof AgentSelfResponse> {
  const full = agentBody(a);
  return {
    id: full.id,
    org_id: full.org_id,
    name: full.name,
    description: full.description,
    scopes: full.scopes ?? [],
    is_active: full.is_active,
    intents_api_enabled: full.intents_api_enabled,
    environment: full.environment,
    created_by: full.created_by,
    created_at: full.created_at,
    expires_at: full.api_key_expires_at,
    last_active_at: full.last_active_at,
  };
}
