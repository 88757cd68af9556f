import type { RequestHandler } from 'express';
import { Router } from 'express';
import { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { body } from './auth-routes.js';
import { declareUncheckedRoute } from './routes.js';

/** Secret-path policies of a vault (spec §2.3, §4.3); the policy service validates and decides. */
export function policyRoutes(
  peers: Peers,
  guards: { authenticated: RequestHandler[]; human: RequestHandler[] },
): Router {
  const router = Router();
  const policy = peers.client(PolicyServiceClient, 'policy');
  const call = unaryCaller(policy);
  const ids = (p: Record<string, string | string[] | undefined>) => ({
    vaultId: String(p['vault_id']),
    policyId: String(p['policy_id']),
  });

  declareUncheckedRoute(
    router,
    guards,
    'post',
    '/v1/vaults/:vault_id/policies',
    'authenticated',
    async (req, res) => {
      const r = await call(policy.createPolicy, {
        vaultId: String(req.params['vault_id']),
        fields: body(req),
      });
      res.status(201).json(r.policy);
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'get',
    '/v1/vaults/:vault_id/policies',
    'authenticated',
    async (req, res) => {
      const r = await call(policy.listPolicies, { vaultId: String(req.params['vault_id']) });
      res.json({ policies: r.policies });
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'put',
    '/v1/vaults/:vault_id/policies/:policy_id',
    'authenticated',
    async (req, res) => {
      const r = await call(policy.updatePolicy, { ...ids(req.params), fields: body(req) });
      res.json(r.policy);
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'delete',
    '/v1/vaults/:vault_id/policies/:policy_id',
    'authenticated',
    async (req, res) => {
      await call(policy.deletePolicy, ids(req.params));
      res.status(204).end();
    },
  );

  return router;
}
