import { Router } from 'express';
import { z } from 'zod/v4';
import type { OrgLimits } from '@custos/proto/custos/billing/v1/messages';
import { BillingServiceClient } from '@custos/proto/custos/billing/v1/service';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { type Guards, declareRoute } from './routes.js';
import { bodyOf, idParam } from './schemas.js';

/** A cap as HTTP shows it: null means unlimited. */
const cap = (n: string | number | undefined) => (n === undefined || Number(n) < 0 ? null : Number(n));

const cappedCount = z.number().int().nullable().describe('null means unlimited');

/** `GET /v1/billing/limits`: the org's plan and its caps. */
export const LimitsResponse = z.object({
  plan: z.string(),
  limits: z.object({
    vaults: cappedCount,
    secrets: cappedCount,
    agents: cappedCount,
    requests_per_month: cappedCount,
  }),
});

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
export function billingRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const billing = peers.client(BillingServiceClient, 'billing');
  const call = unaryCaller(billing);

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/billing/limits',
      access: 'authenticated',
      summary: "The caller's org plan and tier caps",
      tag: 'billing',
      responses: { 200: { description: 'Plan and caps', schema: LimitsResponse } },
    },
    async (_req, res) => {
      const r = await call(billing.getOrgLimits, { orgId: '' });
      res.json(limitsBody(r.limits));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'put',
      path: '/v1/admin/orgs/:org_id/plan',
      access: 'human',
      summary: "Set an org's plan (platform admins)",
      tag: 'billing',
      params: z.object({ org_id: idParam }),
      body: bodyOf({ plan: z.string().max(64).describe('Plan name, e.g. `free`, `pro`, `enterprise`') }),
      responses: { 200: { description: 'The new plan and caps', schema: LimitsResponse } },
    },
    async (_req, res, { params, body }) => {
      const r = await call(billing.setOrgPlan, { orgId: params.org_id, plan: body.plan });
      res.json(limitsBody(r.limits));
    },
  );

  return router;
}
