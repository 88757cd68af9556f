import { type IdentityKeys, currentCaller } from '@custos/auth';
import type { BillingServiceServer } from '@custos/proto/custos/billing/v1/service';
import { type AsyncService, currentRequestContext } from '@custos/service-kit';
import type { PlanService } from '../plans/plan-service.js';

/** gRPC adapter of BillingService: verify the caller, call the rules, encode. */
export function billingGrpc(deps: {
  keys: IdentityKeys;
  plans: PlanService;
}): AsyncService<BillingServiceServer> {
  return {
    async getOrgLimits(req) {
      // A peer service asks without a caller; a forwarded user or agent request carries one.
      const caller = currentRequestContext()?.authorization ? await currentCaller(deps.keys) : undefined;
      return { limits: await deps.plans.limits(caller, req.orgId) };
    },
    async setOrgPlan(req) {
      return { limits: await deps.plans.assign(await currentCaller(deps.keys), req.orgId, req.plan) };
    },
  };
}
