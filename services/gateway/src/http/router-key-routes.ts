import { type RequestHandler, type Response, Router } from 'express';
import { type RouterKey, RouterKeyServiceClient } from '@custos/proto/custos/identity/v1/router_keys';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { body, str, tokenBody } from './auth-routes.js';
import { declareUncheckedRoute } from './routes.js';

const noStore = (res: Response) => res.setHeader('Cache-Control', 'no-store');

/** The HTTP view of a router key; absent limits read as null (no limit). */
function keyBody(k: RouterKey | undefined) {
  return {
    id: k?.id,
    agent_id: k?.agentId,
    key_prefix: k?.keyPrefix,
    max_concurrent_streams: k?.maxConcurrentStreams ?? null,
    spend_cap_micro_usd: k?.spendCapMicroUsd !== undefined ? Number(k.spendCapMicroUsd) : null,
    is_active: !k?.revokedAt,
    created_by: k?.createdBy,
    created_at: k?.createdAt,
    revoked_at: k?.revokedAt || null,
  };
}

/**
 * Router keys of proxy-enabled agents (spec §4.4, org owner/admin, humans only) and their exchange
 * for a 60-second agent token (spec §4.1, §5.4). `POST /v1/auth/agent-token` is declared by the
 * agent routes, which hand a body whose `api_key` starts with `sk-proxy-v1-` on to this group.
 */
export function routerKeyRoutes(
  peers: Peers,
  guards: { authenticated: RequestHandler[]; human: RequestHandler[] },
): Router {
  const router = Router();
  const keys = peers.client(RouterKeyServiceClient, 'identity');
  const call = unaryCaller(keys);

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/agent-token', 'public', async (req, res) => {
    const b = body(req);
    const r = await call(keys.exchangeRouterKey, { apiKey: str(b, 'api_key'), agentId: str(b, 'agent_id') });
    noStore(res);
    res.json(tokenBody(r.tokens));
  });

  declareUncheckedRoute(
    router,
    guards,
    'post',
    '/v1/agents/:agent_id/router-keys',
    'human',
    async (req, res) => {
      const r = await call(keys.createRouterKey, {
        agentId: String(req.params['agent_id']),
        fields: body(req),
      });
      const k = keyBody(r.key);
      noStore(res);
      res.status(201).json({
        id: k.id,
        router_key: r.routerKey,
        agent_id: k.agent_id,
        max_concurrent_streams: k.max_concurrent_streams,
        spend_cap_micro_usd: k.spend_cap_micro_usd,
        created_at: k.created_at,
      });
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'get',
    '/v1/agents/:agent_id/router-keys',
    'human',
    async (req, res) => {
      const r = await call(keys.listRouterKeys, { agentId: String(req.params['agent_id']) });
      res.json({ router_keys: r.keys.map(keyBody) });
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'delete',
    '/v1/agents/:agent_id/router-keys/:key_id',
    'human',
    async (req, res) => {
      await call(keys.revokeRouterKey, {
        agentId: String(req.params['agent_id']),
        keyId: String(req.params['key_id']),
      });
      res.status(204).end();
    },
  );

  return router;
}
