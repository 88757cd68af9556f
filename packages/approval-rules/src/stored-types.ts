// Approval rules as services store and check them: camelCase, numbers as numbers, a condition's
// lists present only when non-empty (identity's agents' action_approval_policy, the policy service's
// consensus_trigger). rule-messages maps them to and from the proto messages.

/** The condition types of an approval rule (the reference's ConsensusCondition). */
export const APPROVAL_CONDITION_TYPES = [
  'value_above',
  'chain_in',
  'to_address_in',
  'function_selector_in',
  'erc20_amount_above',
  'intent_type_in',
  'action_in',
  'action_kind_in',
  'always',
] as const;

/** One condition of an approval rule; `type` says which other field it reads. */
export interface StoredCondition {
  type: (typeof APPROVAL_CONDITION_TYPES)[number];
  thresholdWei?: string;
  thresholdGwei?: number;
  chains?: string[];
  addresses?: string[];
  selectors?: string[];
  thresholdRaw?: string;
  intentTypes?: string[];
  actions?: string[];
  actionKinds?: string[];
}

/** A consensus requirement of an approval rule. */
export interface StoredRequirement {
  minApprovals: number;
  requiredRoles?: string[];
  perRoleMinimums?: Record<string, number>;
  requireCredentialTypes?: string[];
}

/** Conditions that match together (the reference's FlatConditionSet). */
export interface StoredConditionSet {
  conditions: StoredCondition[];
}

/** A rule that sends an agent's matching actions to humans (DECISIONS.md, consensus vocabulary). */
export interface StoredRule {
  conditions: StoredCondition[];
  riskTier: number;
  approval?: StoredRequirement;
  expirySecs?: number;
  /** Whether the agent's creator may vote on its actions (consensus); absent means no. */
  selfApprovalAllowed?: boolean;
  /** The rule does not apply when any of these sets fully matches; absent or empty: never skipped. */
  skipWhen?: StoredConditionSet[];
  /** When non-empty, the rule applies only when one of these sets fully matches. */
  requireWhen?: StoredConditionSet[];
}

/** The approval rules of an agent. */
export interface StoredPolicy {
  rules: StoredRule[];
}
