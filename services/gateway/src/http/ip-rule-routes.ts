import type { RequestHandler } from 'express';
import { Router } from 'express';
import type { IpRule } from '@custos/proto/custos/policy/v1/messages';
import { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { body } from './auth-routes.js';
import type { IpRuleCache } from './ip-filter.js';
import { declareUncheckedRoute } from './routes.js';

/** A rule as HTTP shows it (the reference's IpRuleResponse, with `description` for `label`). */
function ruleBody(r: IpRule | undefined) {
  return {
    id: r?.id,
    org_id: r?.orgId,
    cidr: r?.cidr,
    rule_type: r?.ruleType,
    description: r?.description,
    created_by: r?.createdBy,
    created_by_type: r?.createdByType,
    created_at: r?.createdAt,
  };
}

/** The org's IP allow/block rules (spec §4.7); the policy service validates and decides who may. */
export function ipRuleRoutes(
  peers: Peers,
  cache: IpRuleCache,
  guards: { authenticated: RequestHandler[]; human: RequestHandler[] },
): Router {
  const router = Router();
  const policy = peers.client(PolicyServiceClient, 'policy');
  const call = unaryCaller(policy);

  declareUncheckedRoute(
    router,
    guards,
    'get',
    '/v1/security/ip-rules',
    'authenticated',
    async (_req, res) => {
      const r = await call(policy.listIpRules, {});
      res.json({ rules: r.rules.map(ruleBody) });
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'post',
    '/v1/security/ip-rules',
    'authenticated',
    async (req, res) => {
      const r = await call(policy.createIpRule, { fields: body(req) });
      // This replica applies the change at once; others within IP_RULES_CACHE_TTL_MS.
      cache.invalidate(req.principal!.orgId);
      res.status(201).json(ruleBody(r.rule));
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'delete',
    '/v1/security/ip-rules/:rule_id',
    'authenticated',
    async (req, res) => {
      await call(policy.deleteIpRule, { ruleId: String(req.params['rule_id']) });
      cache.invalidate(req.principal!.orgId);
      res.status(204).end();
    },
  );

  return router;
}
