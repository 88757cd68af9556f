import { Router } from 'express';
import { z } from 'zod/v4';
import type { ApiKey } from '@custos/proto/custos/identity/v1/messages';
import type { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import { unaryCaller } from '@custos/service-kit';
import { TokenResponse, credential, noStore, tokenBody } from './auth-routes.js';
import { type Guards, declareRoute } from './routes.js';
import { bodyOf, dateTime, idParam } from './schemas.js';
import { STEP_UP_PURPOSES, authConfirmOf } from './step-up.js';

const ApiKeyResponse = z.object({
  id: z.string(),
  name: z.string(),
  key_prefix: z.string().describe('`csk_` and the key’s lookup id'),
  is_active: z.boolean(),
  created_at: dateTime.nullable(),
  expires_at: dateTime.nullable(),
  last_used_at: dateTime.nullable(),
});

function keyBody(k: ApiKey | undefined): z.infer<typeof ApiKeyResponse> {
  return {
    id: k?.id ?? '',
    name: k?.name ?? '',
    key_prefix: k?.keyPrefix ?? '',
    is_active: k?.isActive ?? false,
    created_at: k?.createdAt || null,
    expires_at: k?.expiresAt || null,
    last_used_at: k?.lastUsedAt || null,
  };
}

/** Personal API keys (`csk_`) and their exchange for a user token (spec §4.1). */
export function keyRoutes(identity: IdentityServiceClient, guards: Guards): Router {
  const router = Router();
  const call = unaryCaller(identity);
  const tag = 'api-keys';

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/api-keys',
      access: 'human',
      summary: 'Create a personal API key; the key is shown only here',
      tag,
      stepUp: STEP_UP_PURPOSES.apiKeyCreate,
      body: bodyOf({
        name: z.string().describe('1 to 100 characters'),
        expires_at: z
          .string({ error: 'must be an ISO 8601 date-time string' })
          .nullable()
          .optional()
          .describe('ISO 8601, in the future; absent or null: the key does not expire'),
      }),
      responses: {
        201: {
          description: 'The key',
          schema: z.object({ key: ApiKeyResponse, api_key: z.string().describe('The `csk_` key') }),
        },
      },
    },
    async (req, res, { body }) => {
      const r = await call(identity.createApiKey, {
        name: body.name,
        expiresAt: body.expires_at ?? '',
        credential: authConfirmOf(req),
      });
      noStore(res);
      res.status(201).json({ key: keyBody(r.key), api_key: r.apiKey });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/auth/api-keys',
      access: 'human',
      summary: 'The caller’s personal API keys, without their secrets',
      tag,
      responses: { 200: { description: 'The keys', schema: z.object({ keys: z.array(ApiKeyResponse) }) } },
    },
    async (_req, res) => {
      const r = await call(identity.listApiKeys, {});
      res.json({ keys: r.keys.map(keyBody) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'delete',
      path: '/v1/auth/api-keys/:key_id',
      access: 'human',
      summary: 'Revoke a personal API key and the tokens minted from it',
      tag,
      params: z.object({ key_id: idParam }),
      responses: { 204: { description: 'Revoked' } },
    },
    async (_req, res, { params }) => {
      await call(identity.revokeApiKey, { keyId: params.key_id });
      res.status(204).end();
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/api-key-token',
      access: 'public',
      summary: 'Exchange a personal API key for a user access token',
      tag: 'auth',
      body: bodyOf({ api_key: credential('The `csk_` key') }),
      responses: { 200: { description: 'The access token (no refresh token)', schema: TokenResponse } },
    },
    async (_req, res, { body }) => {
      const r = await call(identity.exchangeApiKey, { apiKey: body.api_key ?? '' });
      noStore(res);
      res.json(tokenBody(r.tokens));
    },
  );

  return router;
}
