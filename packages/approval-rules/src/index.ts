export {
  type RuleFacts,
  type RuleMatch,
  type ConditionPolarity,
  approvalRuleJson,
  conditionMatches,
  isConsensus,
  matchApprovalPolicy,
  ruleMatches,
} from './match-fns.js';
export {
  APPROVAL_CONDITION_TYPES,
  type StoredCondition,
  type StoredConditionSet,
  type StoredPolicy,
  type StoredRequirement,
  type StoredRule,
} from './stored-types.js';
export {
  CREDENTIAL_TYPES,
  MAX_APPROVAL_RULES,
  MAX_CONDITION_SETS,
  MAX_RULE_CONDITIONS,
  MAX_RULE_JSON_BYTES,
  MAX_SET_CONDITIONS,
  ORG_ROLES,
  approvalRuleJsonBytes,
  checkApprovalCondition,
  checkApprovalPolicy,
  checkApprovalRule,
} from './check-fns.js';
export { storedPolicyMessage, storedPolicyOf, storedRuleMessage, storedRuleOf } from './rule-messages.js';
