import { Router } from 'express';
import { z } from 'zod/v4';
import { type RouterKey, RouterKeyServiceClient } from '@custos/proto/custos/identity/v1/router_keys';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { noStore } from './auth-routes.js';
import { type Guards, declareRoute } from './routes.js';
import { bodyOf, dateTime, idParam } from './schemas.js';
import { STEP_UP_PURPOSES, authConfirmOf } from './step-up.js';

const limit = (max: number, description: string) =>
  z
    .number({ error: `must be a non-negative integer (at most ${max})` })
    .int(`must be a non-negative integer (at most ${max})`)
    .min(0, `must be a non-negative integer (at most ${max})`)
    .max(max, `must be a non-negative integer (at most ${max})`)
    .nullable()
    .optional()
    .describe(description);

const CreateRouterKeyBody = bodyOf({
  max_concurrent_streams: limit(2 ** 31 - 1, 'Most streams open at once; absent or null: no limit'),
  spend_cap_micro_usd: limit(Number.MAX_SAFE_INTEGER, 'Spend cap in millionths of a dollar; null: no cap'),
});

const RouterKeyResponse = z.object({
  id: z.string(),
  agent_id: z.string(),
  key_prefix: z.string().describe('`sk-proxy-v1-` and the key’s lookup id'),
  max_concurrent_streams: z.number().int().nullable(),
  spend_cap_micro_usd: z.number().int().nullable(),
  is_active: z.boolean(),
  created_by: z.string(),
  created_at: dateTime,
  revoked_at: dateTime.nullable(),
});

const CreatedRouterKeyResponse = RouterKeyResponse.pick({
  id: true,
  agent_id: true,
  max_concurrent_streams: true,
  spend_cap_micro_usd: true,
  created_at: true,
}).extend({ router_key: z.string().describe('The key (`sk-proxy-v1-…`), shown only here') });

/** The HTTP view of a router key; absent limits read as null (no limit). */
function keyBody(k: RouterKey | undefined): z.infer<typeof RouterKeyResponse> {
  return {
    id: k?.id ?? '',
    agent_id: k?.agentId ?? '',
    key_prefix: k?.keyPrefix ?? '',
    max_concurrent_streams: k?.maxConcurrentStreams ?? null,
    spend_cap_micro_usd: k?.spendCapMicroUsd !== undefined ? Number(k.spendCapMicroUsd) : null,
    is_active: !k?.revokedAt,
    created_by: k?.createdBy ?? '',
    created_at: k?.createdAt ?? '',
    revoked_at: k?.revokedAt || null,
  };
}

/**
 * Router keys of proxy-enabled agents (spec §4.4, org owners and admins, humans only). A router
 * key is exchanged for a 60-second agent token at `POST /v1/auth/agent-token` (agent-routes.ts).
 */
export function routerKeyRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const keys = peers.client(RouterKeyServiceClient, 'identity');
  const call = unaryCaller(keys);
  const tag = 'router-keys';
  const params = z.object({ agent_id: idParam });

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/agents/:agent_id/router-keys',
      access: 'human',
      summary: 'Issue a router key for a proxy-enabled agent; the key is shown only here',
      tag,
      stepUp: STEP_UP_PURPOSES.agentRouterKeyCreate,
      params,
      body: CreateRouterKeyBody,
      responses: { 201: { description: 'The new key', schema: CreatedRouterKeyResponse } },
    },
    async (req, res, { params, body }) => {
      const r = await call(keys.createRouterKey, {
        agentId: params.agent_id,
        maxConcurrentStreams: body.max_concurrent_streams ?? undefined,
        spendCapMicroUsd: body.spend_cap_micro_usd == null ? undefined : String(body.spend_cap_micro_usd),
        credential: authConfirmOf(req),
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
      } satisfies z.infer<typeof CreatedRouterKeyResponse>);
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/agents/:agent_id/router-keys',
      access: 'human',
      summary: 'An agent’s router keys, revoked ones included, without their secrets',
      tag,
      params,
      responses: {
        200: { description: 'The keys', schema: z.object({ router_keys: z.array(RouterKeyResponse) }) },
      },
    },
    async (_req, res, { params }) => {
      const r = await call(keys.listRouterKeys, { agentId: params.agent_id });
      res.json({ router_keys: r.keys.map(keyBody) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'delete',
      path: '/v1/agents/:agent_id/router-keys/:key_id',
      access: 'human',
      summary: 'Revoke a router key and every token minted from it',
      tag,
      params: z.object({ agent_id: idParam, key_id: idParam }),
      responses: { 204: { description: 'Revoked' } },
    },
    async (_req, res, { params }) => {
      await call(keys.revokeRouterKey, { agentId: params.agent_id, keyId: params.key_id });
      res.status(204).end();
    },
  );

  return router;
}
