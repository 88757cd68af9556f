import type {
  ActionApprovalPolicy as PolicyMessage,
  ApprovalCondition as ConditionMessage,
  ApprovalConditionSet as ConditionSetMessage,
  ApprovalRule as RuleMessage,
} from '@custos/proto/custos/identity/v1/agents';
import type { StoredCondition, StoredConditionSet, StoredPolicy, StoredRule } from './stored-types.js';

// Maps approval rules between their stored shape (stored-types) and the proto messages of
// identity's agents.proto, which the policy service's consensus_trigger reuses.

/** int64 travels as a decimal string (ts-proto forceLong=string). */
const int64 = (v: number | undefined) => (v === undefined ? undefined : String(v));
const fromInt64 = (v: string | undefined) => (v === undefined ? undefined : Number(v));

function conditionMessage(c: StoredCondition): ConditionMessage {
  return {
    type: c.type,
    thresholdWei: c.thresholdWei,
    thresholdGwei: int64(c.thresholdGwei),
    chains: c.chains ?? [],
    addresses: c.addresses ?? [],
    selectors: c.selectors ?? [],
    thresholdRaw: c.thresholdRaw,
    intentTypes: c.intentTypes ?? [],
    actions: c.actions ?? [],
    actionKinds: c.actionKinds ?? [],
  };
}

/** Keeps the fields a condition's type reads (the message carries every list, empty). */
function conditionOf(m: ConditionMessage): StoredCondition {
  const c: Record<string, unknown> = { type: m.type };
  const scalars = {
    thresholdWei: m.thresholdWei,
    thresholdGwei: fromInt64(m.thresholdGwei),
    thresholdRaw: m.thresholdRaw,
  };
  for (const [k, v] of Object.entries(scalars)) if (v !== undefined) c[k] = v;
  const lists = {
    chains: m.chains,
    addresses: m.addresses,
    selectors: m.selectors,
    intentTypes: m.intentTypes,
    actions: m.actions,
    actionKinds: m.actionKinds,
  };
  for (const [k, v] of Object.entries(lists)) if (v.length > 0) c[k] = v;
  return c as unknown as StoredCondition;
}

const setsMessage = (sets: StoredConditionSet[] | undefined): ConditionSetMessage[] =>
  (sets ?? []).map((set) => ({ conditions: set.conditions.map(conditionMessage) }));

const setsOf = (sets: ConditionSetMessage[]): StoredConditionSet[] =>
  sets.map((set) => ({ conditions: set.conditions.map(conditionOf) }));

/** A stored rule as the proto carries it. */
export function storedRuleMessage(r: StoredRule): RuleMessage {
  return {
    conditions: r.conditions.map(conditionMessage),
    riskTier: r.riskTier,
    selfApprovalAllowed: r.selfApprovalAllowed,
    skipWhen: setsMessage(r.skipWhen),
    requireWhen: setsMessage(r.requireWhen),
    approval: r.approval && {
      minApprovals: r.approval.minApprovals,
      requiredRoles: r.approval.requiredRoles ?? [],
      perRoleMinimums: r.approval.perRoleMinimums ?? {},
      requireCredentialTypes: r.approval.requireCredentialTypes ?? [],
    },
    expirySecs: int64(r.expirySecs),
  };
}

/** A rule message in the stored shape: absent and empty fields left out. */
export function storedRuleOf(r: RuleMessage): StoredRule {
  return {
    conditions: r.conditions.map(conditionOf),
    riskTier: r.riskTier,
    ...(r.approval
      ? {
          approval: {
            minApprovals: r.approval.minApprovals,
            ...(r.approval.requiredRoles.length ? { requiredRoles: r.approval.requiredRoles } : {}),
            ...(Object.keys(r.approval.perRoleMinimums).length
              ? { perRoleMinimums: r.approval.perRoleMinimums }
              : {}),
            ...(r.approval.requireCredentialTypes.length
              ? { requireCredentialTypes: r.approval.requireCredentialTypes }
              : {}),
          },
        }
      : {}),
    ...(r.expirySecs !== undefined ? { expirySecs: Number(r.expirySecs) } : {}),
    ...(r.selfApprovalAllowed !== undefined ? { selfApprovalAllowed: r.selfApprovalAllowed } : {}),
    ...(r.skipWhen.length ? { skipWhen: setsOf(r.skipWhen) } : {}),
    ...(r.requireWhen.length ? { requireWhen: setsOf(r.requireWhen) } : {}),
  };
}

/** A stored policy as the proto carries it. */
export const storedPolicyMessage = (p: StoredPolicy): PolicyMessage => ({
  rules: p.rules.map(storedRuleMessage),
});

/** A policy message in the stored shape. */
export const storedPolicyOf = (m: PolicyMessage): StoredPolicy => ({ rules: m.rules.map(storedRuleOf) });
