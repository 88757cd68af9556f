import { type Request, type Response, Router } from 'express';
import type { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import type { TokenSet, UserProfile } from '@custos/proto/custos/identity/v1/messages';
import { InvalidArgumentError, unaryCaller } from '@custos/service-kit';
import type { IdentityKeys } from '@custos/auth';
import { declareUncheckedRoute } from './routes.js';
import type { RequestHandler } from 'express';

export function tokenBody(t: TokenSet | undefined) {
  return {
    access_token: t?.accessToken ?? '',
    token_type: t?.tokenType ?? 'Bearer',
    expires_in: t?.expiresIn ?? 0,
    ...(t?.refreshToken ? { refresh_token: t.refreshToken } : {}),
  };
}

function profileBody(p: UserProfile | undefined) {
  if (!p) return {};
  return {
    id: p.id,
    email: p.email,
    display_name: p.displayName,
    auth_method: p.authMethod,
    role: p.role,
    email_verified: p.emailVerified,
    marketing_emails: p.marketingEmails,
    totp_enabled: p.totpEnabled,
    org_id: p.orgId,
    created_at: p.createdAt,
  };
}

/** The JSON body as an object, or a 400 naming `body`. */
export function body(req: Request): Record<string, unknown> {
  const b: unknown = req.body;
  if (b === undefined) return {};
  if (b === null || typeof b !== 'object' || Array.isArray(b))
    throw new InvalidArgumentError('body', 'body must be a JSON object');
  // JSON.parse keeps "__proto__" as an own key; it would vanish (or worse) on the way to a service.
  if (Object.hasOwn(b, '__proto__'))
    throw new InvalidArgumentError('__proto__', '__proto__ is not a valid field');
  return b as Record<string, unknown>;
}

/** A string field, '' when absent; a 400 naming the field when it has another type. */
export function str(b: Record<string, unknown>, field: string): string {
  const v = b[field];
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw new InvalidArgumentError(field, `${field} must be a string`);
  return v;
}

const noStore = (res: Response) => res.setHeader('Cache-Control', 'no-store');

/** Sign-up, sign-in, tokens, profile and the public key documents (spec §4.1, §5). */
export function authRoutes(
  identity: IdentityServiceClient,
  keys: IdentityKeys,
  guards: { authenticated: RequestHandler[]; human: RequestHandler[] },
): Router {
  const router = Router();
  const call = unaryCaller(identity);

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/signup', 'public', async (req, res) => {
    const b = body(req);
    const r = await call(identity.signup, {
      email: str(b, 'email'),
      password: str(b, 'password'),
      displayName: str(b, 'display_name'),
    });
    noStore(res);
    res.status(201).json({ message: r.message, email: r.email, ...(r.tokens ? tokenBody(r.tokens) : {}) });
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/verify-email', 'public', async (req, res) => {
    const r = await call(identity.verifyEmail, { token: str(body(req), 'token') });
    noStore(res);
    res.json(tokenBody(r.tokens));
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/token', 'public', async (req, res) => {
    const b = body(req);
    const r = await call(identity.login, { email: str(b, 'email'), password: str(b, 'password') });
    noStore(res);
    if (r.result?.$case === 'mfa') {
      res.json({
        mfa_required: true,
        mfa_token: r.result.value.mfaToken,
        expires_in: r.result.value.expiresIn,
      });
      return;
    }
    res.json(tokenBody(r.result?.value));
  });

  declareUncheckedRoute(router, guards, 'delete', '/v1/auth/token', 'authenticated', async (_req, res) => {
    await call(identity.revokeSession, {});
    res.status(204).end();
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/refresh', 'public', async (req, res) => {
    const r = await call(identity.refreshSession, { refreshToken: str(body(req), 'refresh_token') });
    noStore(res);
    res.json(tokenBody(r.tokens));
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/auth/me', 'human', async (_req, res) => {
    const r = await call(identity.getProfile, {});
    res.json(profileBody(r.profile));
  });

  declareUncheckedRoute(router, guards, 'patch', '/v1/auth/me', 'human', async (req, res) => {
    const b = body(req);
    const marketing = b['marketing_emails'];
    if (marketing !== undefined && typeof marketing !== 'boolean') {
      throw new InvalidArgumentError('marketing_emails', 'marketing_emails must be a boolean');
    }
    const r = await call(identity.updateProfile, {
      ...(b['display_name'] !== undefined ? { displayName: str(b, 'display_name') } : {}),
      ...(marketing !== undefined ? { marketingEmails: marketing } : {}),
    });
    res.json(profileBody(r.profile));
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/auth/jwt-public-key', 'public', async (_req, res) => {
    const k = await keys.activeKey();
    res.json({
      alg: 'EdDSA',
      kid: k.kid,
      public_key_base64: Buffer.from(k.x, 'base64url').toString('base64'),
    });
  });

  declareUncheckedRoute(router, guards, 'get', '/.well-known/jwks.json', 'public', async (_req, res) => {
    const jwks = await keys.jwks();
    res.setHeader('Cache-Control', 'public, max-age=300');
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.type('application/jwk-set+json').send(JSON.stringify(jwks));
  });

  declareUncheckedRoute(
    router,
    guards,
    'get',
    '/.well-known/openid-configuration',
    'public',
    async (_req, res) => {
      const s = await keys.settings();
      const issuer = s.issuers[0]!;
      res.setHeader('Cache-Control', 'public, max-age=300');
      res.json({
        issuer,
        jwks_uri: `${issuer}/.well-known/jwks.json`,
        token_endpoint: `${issuer}/v1/auth/token`,
        grant_types_supported: [
          'password',
          'refresh_token',
          'urn:ietf:params:oauth:grant-type:token-exchange',
        ],
        token_exchange_endpoint: `${issuer}/v1/auth/federated-token`,
        id_token_signing_alg_values_supported: ['EdDSA', 'RS256'],
        token_endpoint_auth_signing_alg_values_supported: ['EdDSA', 'RS256'],
        subject_types_supported: ['public'],
        response_types_supported: ['token'],
      });
    },
  );

  return router;
}
