import { Router } from 'express';
import { z } from 'zod/v4';
import type { IpRule } from '@custos/proto/custos/policy/v1/messages';
import { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import type { IpRuleCache } from './ip-filter.js';
import { type Guards, declareRoute } from './routes.js';
import { bodyOf, dateTime, idParam, must } from './schemas.js';

/** A rule as HTTP shows it (the reference's IpRuleResponse, with `description` for `label`). */
const IpRuleResponse = z.object({
  id: z.string(),
  org_id: z.string(),
  cidr: z.string().describe('Normalised: host bits cleared, IPv6 in short lowercase form'),
  rule_type: z.enum(['allow', 'block']),
  description: z.string().describe('Empty when none was given'),
  created_by: z.string(),
  created_by_type: z.enum(['user', 'agent']),
  created_at: dateTime,
});

// The policy service judges the network (and normalises it); the shapes are checked here.
const CreateBody = bodyOf({
  cidr: z.string().min(1, 'is required').describe('An IPv4 or IPv6 address or CIDR'),
  rule_type: z
    .enum(['allow', 'block', 'deny'])
    .transform((t) => (t === 'deny' ? 'block' : t))
    .describe('`allow` or `block`; `deny` (the 0.53 name) is read as `block`'),
  description: z.string().max(1000).nullish().describe('Free text; default empty'),
});

function ruleBody(r: IpRule): z.infer<typeof IpRuleResponse> {
  return {
    id: r.id,
    org_id: r.orgId,
    cidr: r.cidr,
    rule_type: r.ruleType as 'allow' | 'block',
    description: r.description,
    created_by: r.createdBy,
    created_by_type: r.createdByType as 'user' | 'agent',
    created_at: r.createdAt,
  };
}

const tag = 'security';

/** The org's IP allow/block rules (spec §4.7); the policy service decides who may manage them. */
export function ipRuleRoutes(peers: Peers, cache: IpRuleCache, guards: Guards): Router {
  const router = Router();
  const policy = peers.client(PolicyServiceClient, 'policy');
  const call = unaryCaller(policy);

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/security/ip-rules',
      access: 'authenticated',
      summary: "The org's IP allow and block rules (owners and admins)",
      tag,
      responses: {
        200: { description: 'Oldest first', schema: z.object({ rules: z.array(IpRuleResponse) }) },
      },
    },
    async (_req, res) => {
      const r = await call(policy.listIpRules, {});
      res.json({ rules: r.rules.map(ruleBody) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/security/ip-rules',
      access: 'authenticated',
      summary: 'Add an IP rule (owners and admins); a block wins over an allow',
      tag,
      body: CreateBody,
      responses: { 201: { description: 'The rule', schema: IpRuleResponse } },
    },
    async (req, res, { body }) => {
      const r = await call(policy.createIpRule, {
        cidr: body.cidr,
        ruleType: body.rule_type,
        description: body.description ?? '',
      });
      // This replica applies the change at once; others within IP_RULES_CACHE_TTL_MS.
      cache.invalidate(req.principal!.orgId);
      res.status(201).json(ruleBody(must(r.rule, 'rule')));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'delete',
      path: '/v1/security/ip-rules/:rule_id',
      access: 'authenticated',
      summary: 'Remove an IP rule (owners and admins)',
      tag,
      params: z.object({ rule_id: idParam }),
      responses: { 204: { description: 'Removed' } },
    },
    async (req, res, { params }) => {
      await call(policy.deleteIpRule, { ruleId: params.rule_id });
      cache.invalidate(req.principal!.orgId);
      res.status(204).end();
    },
  );

  return router;
}
