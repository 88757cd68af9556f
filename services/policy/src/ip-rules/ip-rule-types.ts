/** The kinds of IP rule (SPEC §2.5). */
export const RULE_TYPES = ['allow', 'block'] as const;
/** `allow` or `block`. */
export type RuleType = (typeof RULE_TYPES)[number];

/** A new rule as a caller asks for it (unchecked; see `checkIpRuleInput`). */
export interface IpRuleRequest {
  cidr: string;
  ruleType: string;
  /** Empty for none. */
  description: string;
}

/** A checked new rule. */
export interface IpRuleInput {
  cidr: string;
  ruleType: RuleType;
  description: string;
}

/** A stored rule. */
export interface IpRuleRecord extends IpRuleInput {
  id: string;
  orgId: string;
  createdBy: string;
  createdByType: 'user' | 'agent';
  createdAt: Date;
}
