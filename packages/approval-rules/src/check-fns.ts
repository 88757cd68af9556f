import { InvalidArgumentError } from '@custos/service-kit';
import {
  APPROVAL_CONDITION_TYPES,
  type StoredCondition as ApprovalCondition,
  type StoredConditionSet as ApprovalConditionSet,
  type StoredPolicy as ActionApprovalPolicy,
  type StoredRule as ApprovalRule,
} from './stored-types.js';

// The limits of an approval rule (an agent's action_approval_policy, a vault policy's
// consensus_trigger; the gateway's schema says the same). The services that store rules keep them
// whoever calls, so a direct gRPC caller cannot store a rule the matcher would read differently
// from what the API documents.

/** At most this many rules in a policy. */
export const MAX_APPROVAL_RULES = 50;
/** At most this many conditions in a rule's `conditions`. */
export const MAX_RULE_CONDITIONS = 50;
/** At most this many sets in a rule's `skip_when` or `require_when`. */
export const MAX_CONDITION_SETS = 20;
/** At most this many conditions in one set of `skip_when` or `require_when`. */
export const MAX_SET_CONDITIONS = 20;
/**
 * The credential types a consensus requirement may ask for: what a vote proves directly with
 * X-Auth-Confirm (approvals records a vote's credential as session, reauth_token, password or
 * totp; a passkey, biometric or API key is never what a vote carries, so asking for one would
 * hold the approval pending until it expires).
 */
export const CREDENTIAL_TYPES = ['password', 'totp'] as const;

/** The roles of an org member: what `required_roles` and `per_role_minimums` may name. */
export const ORG_ROLES = ['owner', 'admin', 'member'] as const;

/**
 * The largest rule, in bytes of its JSON in the HTTP (snake_case) shape. The matching rule travels
 * with each approval request and approvals refuses a `rule` over 64 KiB, so a larger rule would
 * make every action it matches fail; half of that leaves room for how the signer writes it.
 */
export const MAX_RULE_JSON_BYTES = 32 * 1024;

const MAX_LIST = 1000;
const MAX_ITEM = 256;
const DECIMAL = /^\d{1,78}$/;

/** The list field each list-reading condition type reads, by its API name. */
const LIST_FIELD: Partial<Record<ApprovalCondition['type'], [keyof ApprovalCondition, string]>> = {
  chain_in: ['chains', 'chains'],
  to_address_in: ['addresses', 'addresses'],
  function_selector_in: ['selectors', 'selectors'],
  intent_type_in: ['intentTypes', 'intent_types'],
  action_in: ['actions', 'actions'],
  action_kind_in: ['actionKinds', 'action_kinds'],
};

/** The fields a condition type reads (besides `type`); any other field set is refused. */
const READS: Record<ApprovalCondition['type'], ReadonlyArray<keyof ApprovalCondition>> = {
  value_above: ['thresholdWei', 'thresholdGwei'],
  chain_in: ['chains'],
  to_address_in: ['addresses'],
  function_selector_in: ['selectors'],
  erc20_amount_above: ['thresholdRaw'],
  intent_type_in: ['intentTypes'],
  action_in: ['actions'],
  action_kind_in: ['actionKinds'],
  always: [],
};

const API_NAME: Record<Exclude<keyof ApprovalCondition, 'type'>, string> = {
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

function refuse(field: string, why: string): never {
  throw new InvalidArgumentError(field, `${field} ${why}`);
}

function checkCount(field: string, n: number, min: number, max: number): void {
  if (n < min || n > max) refuse(field, `must hold ${min} to ${max} entries`);
}

function checkInt(field: string, v: number | undefined, min: number, max: number): void {
  if (v !== undefined && (!Number.isInteger(v) || v < min || v > max))
    refuse(field, `must be an integer from ${min} to ${max}`);
}

function checkStrings(field: string, values: unknown, maxItems: number, maxLength: number): void {
  if (!Array.isArray(values)) refuse(field, 'must be a list of strings');
  if (values.length > maxItems) refuse(field, `must hold at most ${maxItems} entries`);
  values.forEach((v, i) => {
    if (typeof v !== 'string' || v.length > maxLength)
      refuse(`${field}[${i}]`, `must be a string of at most ${maxLength} characters`);
  });
}

/** One condition: a known type, only the fields that type reads, each in shape. */
export function checkApprovalCondition(field: string, c: ApprovalCondition): void {
  if (!(APPROVAL_CONDITION_TYPES as readonly string[]).includes(c.type))
    refuse(`${field}.type`, `must be one of ${APPROVAL_CONDITION_TYPES.join(', ')}`);
  const reads = READS[c.type];
  for (const key of Object.keys(API_NAME) as Array<keyof typeof API_NAME>) {
    if (c[key] !== undefined && !reads.includes(key))
      refuse(`${field}.${API_NAME[key]}`, `is not read by a ${c.type} condition`);
  }
  switch (c.type) {
    case 'value_above':
      if (c.thresholdWei === undefined && c.thresholdGwei === undefined)
        refuse(`${field}.threshold_wei`, 'or threshold_gwei is required');
      if (c.thresholdWei !== undefined && !DECIMAL.test(c.thresholdWei))
        refuse(`${field}.threshold_wei`, 'must be a decimal integer');
      checkInt(`${field}.threshold_gwei`, c.thresholdGwei, 0, Number.MAX_SAFE_INTEGER);
      return;
    case 'erc20_amount_above':
      if (c.thresholdRaw === undefined || !DECIMAL.test(c.thresholdRaw))
        refuse(`${field}.threshold_raw`, 'must be a decimal integer');
      return;
    case 'always':
      return;
    default: {
      const [key, name] = LIST_FIELD[c.type]!;
      checkStrings(`${field}.${name}`, c[key] ?? [], MAX_LIST, MAX_ITEM);
    }
  }
}

function checkConditionSets(field: string, sets: ApprovalConditionSet[] | undefined): void {
  if (sets === undefined) return;
  checkCount(field, sets.length, 0, MAX_CONDITION_SETS);
  sets.forEach((set, i) => {
    const f = `${field}[${i}].conditions`;
    // An empty set would match every action: a skip_when that always skips, a require_when that
    // never limits. Neither is what a rule's author means, so it is refused.
    checkCount(f, set.conditions.length, 1, MAX_SET_CONDITIONS);
    set.conditions.forEach((c, j) => checkApprovalCondition(`${f}[${j}]`, c));
  });
}

/**
 * A value with its object keys in snake_case and its empty lists left out: the HTTP shape of a
 * domain rule (a gRPC message carries every list of a condition, the API only those it sends).
 */
function snakeJson(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(snakeJson);
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(
    Object.entries(v)
      .filter(([, x]) => !(Array.isArray(x) && x.length === 0))
      .map(([k, x]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), snakeJson(x)]),
  );
}

/** The size of a rule's JSON in the HTTP shape, in UTF-8 bytes. */
export function approvalRuleJsonBytes(r: ApprovalRule): number {
  return Buffer.byteLength(JSON.stringify(snakeJson(r)));
}

/** Checks one rule; a 400 names the field under `field`. */
export function checkApprovalRule(field: string, r: ApprovalRule): void {
  checkCount(`${field}.conditions`, r.conditions.length, 1, MAX_RULE_CONDITIONS);
  r.conditions.forEach((c, j) => checkApprovalCondition(`${field}.conditions[${j}]`, c));
  checkInt(`${field}.risk_tier`, r.riskTier, 1, 3);
  checkInt(`${field}.expiry_secs`, r.expirySecs, 60, 2_592_000);
  checkConditionSets(`${field}.skip_when`, r.skipWhen);
  checkConditionSets(`${field}.require_when`, r.requireWhen);
  const a = r.approval;
  if (a) {
    checkInt(`${field}.approval.min_approvals`, a.minApprovals, 1, 100);
    const roles = a.requiredRoles ?? [];
    checkStrings(`${field}.approval.required_roles`, roles, 20, 64);
    roles.forEach((role, i) => {
      if (!(ORG_ROLES as readonly string[]).includes(role))
        refuse(`${field}.approval.required_roles[${i}]`, `must be one of ${ORG_ROLES.join(', ')}`);
    });
    for (const [role, n] of Object.entries(a.perRoleMinimums ?? {})) {
      const f = `${field}.approval.per_role_minimums.${role}`;
      if (!(ORG_ROLES as readonly string[]).includes(role))
        refuse(
          role.length > 64 ? `${field}.approval.per_role_minimums` : f,
          `names a role that is not one of ${ORG_ROLES.join(', ')}`,
        );
      // Only the members of required_roles vote: a minimum of another role could never be met.
      if (roles.length > 0 && !roles.includes(role))
        refuse(f, `names a role that is not in ${field}.approval.required_roles`);
      checkInt(f, n, 1, 100);
    }
    const types = a.requireCredentialTypes ?? [];
    types.forEach((t, i) => {
      if (!(CREDENTIAL_TYPES as readonly string[]).includes(t))
        refuse(
          `${field}.approval.require_credential_types[${i}]`,
          `must be one of ${CREDENTIAL_TYPES.join(', ')} (what a vote proves with X-Auth-Confirm)`,
        );
    });
    // A tier 3 vote is always a TOTP code: a tier 3 rule asking only for a password never passes.
    if (r.riskTier === 3 && types.length > 0 && !types.includes('totp'))
      refuse(
        `${field}.approval.require_credential_types`,
        'must include totp on a tier 3 rule (every vote on a tier 3 approval is a TOTP code)',
      );
  }
  if (approvalRuleJsonBytes(r) > MAX_RULE_JSON_BYTES)
    refuse(
      field,
      `must be at most ${MAX_RULE_JSON_BYTES} bytes of JSON (the rule travels with each approval request)`,
    );
}

/**
 * Checks an action_approval_policy whoever sent it: at most 50 rules of 1 to 50 conditions, each
 * condition of a known type with the fields that type reads, tier 1 to 3, expiry 60 s to 30 days,
 * a consensus requirement in range, and `skip_when` / `require_when` of at most 20 sets of 1 to 20
 * conditions each (checked as `conditions` are), each rule at most 32 KiB of JSON. Throws a 400 naming the field.
 */
export function checkApprovalPolicy(p: ActionApprovalPolicy, field = 'action_approval_policy'): void {
  checkCount(`${field}.rules`, p.rules.length, 0, MAX_APPROVAL_RULES);
  p.rules.forEach((r, i) => checkApprovalRule(`${field}.rules[${i}]`, r));
}
