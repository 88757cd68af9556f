export {
  type RuleFacts,
  type RuleMatch,
  approvalRuleJson,
  conditionMatches,
  isConsensus,
  matchApprovalPolicy,
  ruleMatches,
} from './match-fns.js';
