import { type RequestHandler, Router } from 'express';
import type { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import { unaryCaller } from '@custos/service-kit';
import { body, str, tokenBody } from './auth-routes.js';
import { declareUncheckedRoute } from './routes.js';

/** Agents (spec §4.4) and the agent key exchange (spec §4.1); identity decides who may do what. */
export function agentRoutes(
  identity: IdentityServiceClient,
  guards: { authenticated: RequestHandler[]; human: RequestHandler[] },
): Router {
  const router = Router();
  const call = unaryCaller(identity);

  // A router key (`sk-proxy-v1-`, spec §5.4) leaves this group for the router-key routes' exchange.
  router.post('/v1/auth/agent-token', (req, _res, next) => {
    const key: unknown = (req.body as Record<string, unknown> | undefined)?.['api_key'];
    next(typeof key === 'string' && key.startsWith('sk-proxy-v1-') ? 'router' : undefined);
  });
  declareUncheckedRoute(router, guards, 'post', '/v1/auth/agent-token', 'public', async (req, res) => {
    const b = body(req);
    const r = await call(identity.exchangeAgentKey, {
      agentId: str(b, 'agent_id'),
      apiKey: str(b, 'api_key'),
    });
    res.setHeader('Cache-Control', 'no-store');
    res.json(tokenBody(r.tokens));
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/agents', 'authenticated', async (req, res) => {
    const r = await call(identity.createAgent, { fields: body(req) });
    res.setHeader('Cache-Control', 'no-store');
    res.status(201).json({ agent: r.agent, api_key: r.apiKey });
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/agents', 'authenticated', async (_req, res) => {
    const r = await call(identity.listAgents, {});
    res.json({ agents: r.agents });
  });

  // Declared before /v1/agents/:agent_id so that `me` is not taken for an id.
  declareUncheckedRoute(router, guards, 'get', '/v1/agents/me', 'authenticated', async (_req, res) => {
    const r = await call(identity.getSelfAgent, {});
    res.json(r.agent);
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/agents/:agent_id', 'authenticated', async (req, res) => {
    const r = await call(identity.getAgent, { agentId: String(req.params['agent_id']) });
    res.json(r.agent);
  });

  declareUncheckedRoute(
    router,
    guards,
    'patch',
    '/v1/agents/:agent_id',
    'authenticated',
    async (req, res) => {
      const r = await call(identity.updateAgent, {
        agentId: String(req.params['agent_id']),
        fields: body(req),
      });
      res.json(r.agent);
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'delete',
    '/v1/agents/:agent_id',
    'authenticated',
    async (req, res) => {
      await call(identity.deactivateAgent, { agentId: String(req.params['agent_id']) });
      res.status(204).end();
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'post',
    '/v1/agents/:agent_id/rotate-key',
    'authenticated',
    async (req, res) => {
      const r = await call(identity.rotateAgentKey, { agentId: String(req.params['agent_id']) });
      res.setHeader('Cache-Control', 'no-store');
      res.json({ api_key: r.apiKey });
    },
  );

  return router;
}
