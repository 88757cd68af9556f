import { type RequestHandler, Router } from 'express';
import type { ApiKey } from '@custos/proto/custos/identity/v1/messages';
import type { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import { InvalidArgumentError, unaryCaller } from '@custos/service-kit';
import { body, str, tokenBody } from './auth-routes.js';
import { declareUncheckedRoute } from './routes.js';

function keyBody(k: ApiKey | undefined) {
  return {
    id: k?.id,
    name: k?.name,
    key_prefix: k?.keyPrefix,
    is_active: k?.isActive,
    created_at: k?.createdAt || null,
    expires_at: k?.expiresAt || null,
    last_used_at: k?.lastUsedAt || null,
  };
}

/** Personal API keys (`csk_`) and their exchange for a user token (spec §4.1). */
export function keyRoutes(
  identity: IdentityServiceClient,
  guards: { authenticated: RequestHandler[]; human: RequestHandler[] },
): Router {
  const router = Router();
  const call = unaryCaller(identity);

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/api-keys', 'human', async (req, res) => {
    const b = body(req);
    if (b['expires_at'] !== undefined && b['expires_at'] !== null && typeof b['expires_at'] !== 'string') {
      throw new InvalidArgumentError('expires_at', 'expires_at must be an ISO 8601 date-time string');
    }
    const r = await call(identity.createApiKey, { name: str(b, 'name'), expiresAt: str(b, 'expires_at') });
    res.setHeader('Cache-Control', 'no-store');
    res.status(201).json({ key: keyBody(r.key), api_key: r.apiKey });
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/auth/api-keys', 'human', async (_req, res) => {
    const r = await call(identity.listApiKeys, {});
    res.json({ keys: r.keys.map(keyBody) });
  });

  declareUncheckedRoute(router, guards, 'delete', '/v1/auth/api-keys/:key_id', 'human', async (req, res) => {
    await call(identity.revokeApiKey, { keyId: String(req.params['key_id']) });
    res.status(204).end();
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/api-key-token', 'public', async (req, res) => {
    const r = await call(identity.exchangeApiKey, { apiKey: str(body(req), 'api_key') });
    res.setHeader('Cache-Control', 'no-store');
    res.json(tokenBody(r.tokens));
  });

  return router;
}
