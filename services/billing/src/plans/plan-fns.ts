import type { OrgPlan, Plan, PlanCaps } from './plan-types.js';

/** The plans an org can be on (DECISIONS.md "Tier caps"). */
export const PLANS = ['free', 'pro', 'business', 'enterprise'] as [Plan, ...Plan[]];

const CAPS: Readonly<Record<Plan, PlanCaps>> = {
  free: { vaults: 3, secrets: 50, agents: 2, requestsPerMonth: 1_000 },
  pro: { vaults: 25, secrets: 500, agents: 10, requestsPerMonth: 25_000 },
  business: { vaults: 100, secrets: 5_000, agents: 50, requestsPerMonth: 100_000 },
  enterprise: { vaults: null, secrets: null, agents: null, requestsPerMonth: null },
};

/** Whether a string names a plan. */
export function isPlan(value: string): value is Plan {
  return (PLANS as string[]).includes(value);
}

/** The caps of a plan. */
export function capsOf(plan: Plan): PlanCaps {
  return CAPS[plan];
}

/** A plan with its caps. */
export function orgPlanOf(plan: Plan): OrgPlan {
  return { plan, caps: capsOf(plan) };
}
