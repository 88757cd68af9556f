import { type IdentityKeys, currentCaller } from '@custos/auth';
import type { OrgLimits } from '@custos/proto/custos/billing/v1/messages';
import type { BillingServiceServer } from '@custos/proto/custos/billing/v1/service';
import { type AsyncService, type RpcAccess, currentRequestContext } from '@custos/service-kit';
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

/**
 * Who may call BillingService: the gateway (users' requests); an org's caps also vault-crypto and
 * identity, which enforce them.
 */
export const billingAccess: RpcAccess<BillingServiceServer> = {
  default: ['gateway'],
  methods: { getOrgLimits: ['gateway', 'vault-crypto', 'identity'] },
};

/** gRPC adapter of BillingService: verify the caller, call the rules, encode. */
export function billingGrpc(deps: {
  keys: IdentityKeys;
  plans: Pick<PlanService, 'limits' | 'assign'>;
}): AsyncService<BillingServiceServer> {
  return {
    async getOrgLimits(req) {
      // vault-crypto and identity ask for the org they act in (no user token reaches billing from
      // them); the gateway's call carries the user's, who may ask about their own org only.
      const fromGateway = currentRequestContext()?.caller === 'gateway';
      const caller = fromGateway ? await currentCaller(deps.keys) : undefined;
      return { limits: orgLimitsMessage(await deps.plans.limits(caller, req.orgId)) };
    },
    async setOrgPlan(req) {
      const caller = await currentCaller(deps.keys);
      return { limits: orgLimitsMessage(await deps.plans.assign(caller, req.orgId, req.plan)) };
    },
  };
}
