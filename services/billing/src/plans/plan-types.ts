/** A plan an org can be on (DECISIONS.md "Tier caps"). */
export type Plan = 'free' | 'pro' | 'business' | 'enterprise';

/** A plan's caps; `null` means unlimited. */
export interface PlanCaps {
  vaults: number | null;
  secrets: number | null;
  agents: number | null;
  requestsPerMonth: number | null;
}

/** The plan an org is on and the caps that come with it. */
export interface OrgPlan {
  plan: Plan;
  caps: PlanCaps;
}
