import type { RequestHandler } from 'express';
import { Router } from 'express';
import type { OrgLimits } from '@custos/proto/custos/billing/v1/messages';
import { BillingServiceClient } from '@custos/proto/custos/billing/v1/service';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { body, str } from './auth-routes.js';
import { declareRoute } from './routes.js';

/** A cap as HTTP shows it: null means unlimited. */
const cap = (n: string | number | undefined) => (n === undefined || Number(n) < 0 ? null : Number(n));

function limitsBody(l: OrgLimits | undefined) {
  return {
    plan: l?.plan,
    limits: {
      vaults: cap(l?.maxVaults),
      secrets: cap(l?.maxSecrets),
      agents: cap(l?.maxAgents),
      requests_per_month: cap(l?.maxRequestsPerMonth),
    },
  };
}

/** The org's plan and tier caps, and the platform admin's plan assignment. */
export function billingRoutes(
  peers: Peers,
  guards: { authenticated: RequestHandler[]; human: RequestHandler[] },
): Router {
  const router = Router();
  const billing = peers.client(BillingServiceClient, 'billing');
  const call = unaryCaller(billing);

  declareRoute(router, guards, 'get', '/v1/billing/limits', 'authenticated', async (_req, res) => {
    const r = await call(billing.getOrgLimits, { orgId: '' });
    res.json(limitsBody(r.limits));
  });

  declareRoute(router, guards, 'put', '/v1/admin/orgs/:org_id/plan', 'human', async (req, res) => {
    const r = await call(billing.setOrgPlan, {
      orgId: String(req.params['org_id']),
      plan: str(body(req), 'plan'),
    });
    res.json(limitsBody(r.limits));
  });

  return router;
}
