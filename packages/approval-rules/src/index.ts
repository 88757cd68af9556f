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
