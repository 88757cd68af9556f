/** The plans an org can be on (DECISIONS.md "Tier caps"). */
export const PLANS = ['free', 'pro', 'business', 'enterprise'] as [Plan, ...Plan[]];
export type Plan = 'free' | 'pro' | 'business' | 'enterprise';

/** A plan's caps; `null` means unlimited. */
export interface PlanCaps {
  vaults: number | null;
  secrets: number | null;
  agents: number | null;
  requestsPerMonth: number | null;
}

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

/** The caps as the wire carries them: a decimal string, `-1` for unlimited. */
export function wireCaps(plan: Plan) {
  const c = capsOf(plan);
  const n = (v: number | null) => String(v ?? -1);
  return {
    plan,
    maxVaults: n(c.vaults),
    maxSecrets: n(c.secrets),
    maxAgents: n(c.agents),
    maxRequestsPerMonth: n(c.requestsPerMonth),
  };
}
