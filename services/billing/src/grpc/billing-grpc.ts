import { type IdentityKeys, currentCaller } from '@custos/auth';
import type { OrgLimits } from '@custos/proto/custos/billing/v1/messages';
import type { BillingServiceServer } from '@custos/proto/custos/billing/v1/service';
import { type AsyncService, currentRequestContext } from '@custos/service-kit';
import type { PlanService } from '../plans/plan-service.js';
import type { OrgPlan } from '../plans/plan-types.js';

/** An org's plan as the wire carries it: caps as decimal strings, `-1` for unlimited. */
export function orgLimitsMessage(p: OrgPlan): OrgLimits {
  const n = (v: number | null) => String(v ?? -1);
  return {
    plan: p.plan,
    maxVaults: n(p.caps.vaults),
    maxSecrets: n(p.caps.secrets),
    maxAgents: n(p.caps.agents),
    maxRequestsPerMonth: n(p.caps.requestsPerMonth),
  };
}

/** gRPC adapter of BillingService: verify the caller, call the rules, encode. */
export function billingGrpc(deps: {
  keys: IdentityKeys;
  plans: Pick<PlanService, 'limits' | 'assign'>;
}): AsyncService<BillingServiceServer> {
  return {
    async getOrgLimits(req) {
      // A peer service asks without a caller; a forwarded user or agent request carries one.
      const caller = currentRequestContext()?.authorization ? await currentCaller(deps.keys) : undefined;
      return { limits: orgLimitsMessage(await deps.plans.limits(caller, req.orgId)) };
    },
    async setOrgPlan(req) {
      const caller = await currentCaller(deps.keys);
      return { limits: orgLimitsMessage(await deps.plans.assign(caller, req.orgId, req.plan)) };
    },
  };
}
