import type {
  ActionApprovalPolicy,
  ApprovalCondition,
  ApprovalConditionSet,
  ApprovalRequirement,
  ApprovalRule,
} from '@custos/proto/custos/identity/v1/agents';

/** What is known of an action when an agent's action_approval_policy is checked against it. */
export interface RuleFacts {
  /** 'agent_transaction' | 'agent_sign_intent' | a requested action. */
  action?: string;
  /** 'transaction' | 'personal_sign' | 'typed_data' | 'eip712_digest' | ... */
  intentType?: string;
  /** Chain name, e.g. 'anvil', 'ethereum', 'bitcoin'. */
  chain?: string;
  /** Decimal chain id when the chain has one. */
  chainId?: string;
  /** Destination address as given. */
  to?: string;
  /** Value in the chain's smallest unit (wei, satoshi, lamport, drop, sun, lovelace). */
  valueWei?: bigint;
  /** '0x' + 8 hex of call data, lowercased, when data has >= 4 bytes. */
  selector?: string;
  /** The amount of a decoded ERC-20 transfer/approve/transferFrom. */
  erc20Amount?: bigint;
  /**
   * A token transfer whose amount cannot be known (a known ERC-20 selector whose arguments do not
   * decode, a token transfer without decimals): `erc20_amount_above` matches in `conditions` and
   * `require_when` and does not match in `skip_when`, so an unknown amount always errs towards asking a
   * human (fails closed) and never skips a rule.
   */
  erc20AmountUnknown?: boolean;
}

/** The rule that sends an action to humans, and what it asks of them. */
export interface RuleMatch {
  /** Highest risk_tier of the matching rules. */
  tier: 1 | 2 | 3;
  /** Index (in policy.rules) of the deciding rule. */
  ruleIndex: number;
  /** The deciding rule. */
  rule: ApprovalRule;
  /** The deciding rule in the HTTP (snake_case) shape, for approvers. */
  ruleJson: Record<string, unknown>;
  /** Present when the deciding rule asks for a consensus. */
  requirement?: ApprovalRequirement & { selfApprovalAllowed: boolean };
  /** The smallest expiry_secs of the matching rules. */
  expirySecs?: number;
}

const GWEI = 1_000_000_000n;

/** A decimal threshold; a malformed one reads as 0, so the condition errs towards asking a human. */
function threshold(v: string | undefined): bigint | undefined {
  if (v === undefined) return undefined;
  const t = v.trim();
  return /^\d{1,78}$/.test(t) ? BigInt(t) : 0n;
}

const lower = (v: string) => v.trim().toLowerCase();
const inList = (list: string[], value: string) => list.some((x) => lower(x) === lower(value));

const EVM_HEX = /^0x[0-9a-f]{40}$/i;
// bech32/bech32m: human-readable part, '1', data in the bech32 charset; one case throughout.
const BECH32 = /^[a-z0-9]{1,83}1[qpzry9x8gf2tvdw0s3jn54khce6mua7l]{6,}$/;
const caseFree = (a: string) =>
  EVM_HEX.test(a) || BECH32.test(a) || (BECH32.test(a.toLowerCase()) && a === a.toUpperCase());

/**
 * Whether an address is in the list: EVM hex and bech32 addresses compare whatever the case (their
 * case carries no meaning, or only a checksum); any other (base58, ...) exactly, as its case is part
 * of the address.
 */
function addressIn(list: string[], value: string): boolean {
  const v = value.trim();
  return list.some((x) => {
    const a = x.trim();
    if (a === v) return true;
    return caseFree(a) && caseFree(v) && a.toLowerCase() === v.toLowerCase();
  });
}

function actionKindMatches(kind: string, action: string): boolean {
  const k = kind.trim();
  if (k === '*') return true;
  if (k.endsWith('.*')) return action.startsWith(k.slice(0, -1));
  return action === k || action.startsWith(`${k}.`);
}

/**
 * Where a condition is read: 'ask' in `conditions` and `require_when` (a match asks for a human),
 * 'skip' in `skip_when` (a match spares one). A fact that cannot be known matches only where that
 * asks for a human.
 */
export type ConditionPolarity = 'ask' | 'skip';

/** Whether one condition holds for the facts; a condition whose fact is missing does not. */
export function conditionMatches(
  c: ApprovalCondition,
  f: RuleFacts,
  polarity: ConditionPolarity = 'ask',
): boolean {
  switch (c.type) {
    case 'always':
      return true;
    case 'value_above': {
      if (f.valueWei === undefined) return false;
      const wei = threshold(c.thresholdWei);
      const gwei = threshold(c.thresholdGwei);
      const limit = wei ?? (gwei === undefined ? undefined : gwei * GWEI);
      // Neither threshold set: any value above zero.
      return f.valueWei > (limit ?? 0n);
    }
    case 'chain_in':
      return (
        (f.chain !== undefined && inList(c.chains, f.chain)) ||
        (f.chainId !== undefined && inList(c.chains, f.chainId))
      );
    case 'to_address_in':
      return f.to !== undefined && addressIn(c.addresses, f.to);
    case 'function_selector_in':
      return f.selector !== undefined && inList(c.selectors, f.selector);
    case 'erc20_amount_above':
      if (f.erc20Amount !== undefined) return f.erc20Amount > (threshold(c.thresholdRaw) ?? 0n);
      // An amount that cannot be known asks for a human and never skips one.
      return f.erc20AmountUnknown === true && polarity === 'ask';
    case 'intent_type_in':
      return f.intentType !== undefined && inList(c.intentTypes, f.intentType);
    case 'action_in':
      return f.action !== undefined && c.actions.includes(f.action);
    case 'action_kind_in': {
      const action = f.action;
      return action !== undefined && c.actionKinds.some((k) => actionKindMatches(k, action));
    }
    default:
      // An unknown condition type (the gateway refuses them) never matches.
      return false;
  }
}

const setMatches = (s: ApprovalConditionSet, f: RuleFacts, polarity: ConditionPolarity) =>
  s.conditions.length > 0 && s.conditions.every((c) => conditionMatches(c, f, polarity));

/**
 * Whether a rule applies: every condition matches, no skip_when set fully matches, and when
 * require_when is set, one of its sets fully matches (an empty set holds vacuously there; an empty
 * set never skips).
 */
export function ruleMatches(r: ApprovalRule, f: RuleFacts): boolean {
  if (!r.conditions.every((c) => conditionMatches(c, f))) return false;
  if (r.skipWhen.some((s) => setMatches(s, f, 'skip'))) return false;
  if (
    r.requireWhen.length > 0 &&
    !r.requireWhen.some((s) => s.conditions.length === 0 || setMatches(s, f, 'ask'))
  )
    return false;
  return true;
}

/** Whether a requirement asks for more than one plain human decision. */
export function isConsensus(r: ApprovalRequirement | undefined): boolean {
  if (!r) return false;
  return (
    r.minApprovals > 1 ||
    r.requiredRoles.length > 0 ||
    Object.keys(r.perRoleMinimums ?? {}).length > 0 ||
    r.requireCredentialTypes.length > 0
  );
}

const tierOf = (r: ApprovalRule): 1 | 2 | 3 => (r.riskTier >= 3 ? 3 : r.riskTier <= 1 ? 1 : 2);

function expiryOf(r: ApprovalRule): number | undefined {
  if (r.expirySecs === undefined) return undefined;
  const n = Number(r.expirySecs);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/** How many humans a rule asks for, to order rules of one tier: consensus first, then more approvals. */
function humansAsked(r: ApprovalRule): [number, number] {
  return [isConsensus(r.approval) ? 1 : 0, Math.max(1, r.approval?.minApprovals ?? 1)];
}

/** Whether rule a decides over rule b (b came first in the policy). */
function outranks(a: ApprovalRule, b: ApprovalRule): boolean {
  if (tierOf(a) !== tierOf(b)) return tierOf(a) > tierOf(b);
  const [ac, an] = humansAsked(a);
  const [bc, bn] = humansAsked(b);
  if (ac !== bc) return ac > bc;
  return an > bn;
}

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

/** A rule in the HTTP (snake_case) shape of an agent's action_approval_policy. */
export function approvalRuleJson(r: ApprovalRule): Record<string, unknown> {
  const out: Record<string, unknown> = { conditions: r.conditions.map(conditionJson), risk_tier: r.riskTier };
  if (r.approval) {
    const a = r.approval;
    out['approval'] = {
      min_approvals: a.minApprovals,
      ...(a.requiredRoles.length ? { required_roles: a.requiredRoles } : {}),
      ...(Object.keys(a.perRoleMinimums ?? {}).length ? { per_role_minimums: a.perRoleMinimums } : {}),
      ...(a.requireCredentialTypes.length ? { require_credential_types: a.requireCredentialTypes } : {}),
    };
  }
  if (r.expirySecs !== undefined) out['expiry_secs'] = Number(r.expirySecs);
  if (r.selfApprovalAllowed !== undefined) out['self_approval_allowed'] = r.selfApprovalAllowed;
  const sets = (s: ApprovalConditionSet[]) => s.map((x) => ({ conditions: x.conditions.map(conditionJson) }));
  if (r.skipWhen.length) out['skip_when'] = sets(r.skipWhen);
  if (r.requireWhen.length) out['require_when'] = sets(r.requireWhen);
  return out;
}

/**
 * The rule of the policy that sends the action to humans, or undefined when none matches. The
 * deciding rule has the highest risk tier; among equals the one asking the most humans (a consensus
 * over a single decision, then more approvals), then the first.
 */
export function matchApprovalPolicy(
  policy: ActionApprovalPolicy | undefined,
  facts: RuleFacts,
): RuleMatch | undefined {
  if (!policy) return undefined;
  let best: { rule: ApprovalRule; index: number } | undefined;
  let expirySecs: number | undefined;
  policy.rules.forEach((rule, index) => {
    if (!ruleMatches(rule, facts)) return;
    const e = expiryOf(rule);
    if (e !== undefined) expirySecs = expirySecs === undefined ? e : Math.min(expirySecs, e);
    if (!best || outranks(rule, best.rule)) best = { rule, index };
  });
  if (!best) return undefined;
  const { rule, index } = best;
  const match: RuleMatch = { tier: tierOf(rule), ruleIndex: index, rule, ruleJson: approvalRuleJson(rule) };
  if (rule.approval && isConsensus(rule.approval))
    match.requirement = { ...rule.approval, selfApprovalAllowed: rule.selfApprovalAllowed ?? false };
  if (expirySecs !== undefined) match.expirySecs = expirySecs;
  return match;
}
