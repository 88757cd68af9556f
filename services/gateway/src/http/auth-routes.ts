import { type Response, Router } from 'express';
import { z } from 'zod/v4';
import type { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import type { MfaChallenge, TokenSet, UserProfile } from '@custos/proto/custos/identity/v1/messages';
import { unaryCaller } from '@custos/service-kit';
import type { IdentityKeys } from '@custos/auth';
import { type Guards, declareRoute } from './routes.js';
import { bodyOf, dateTime } from './schemas.js';

/** The token response of every sign-in and exchange (the reference's TokenResponse). */
export const TokenResponse = z.object({
  access_token: z.string(),
  token_type: z.string().describe('Always `Bearer`'),
  expires_in: z.number().int().describe('Seconds until the access token expires'),
  refresh_token: z.string().optional().describe('Single-use refresh token; only where one is issued'),
});

/** What a password or Google sign-in answers when the user has a second factor. */
export const MfaRequiredResponse = z.object({
  mfa_required: z.literal(true),
  mfa_token: z.string().describe('Send it with the code to `POST /v1/auth/mfa/verify`'),
  expires_in: z.number().int(),
});

/** A sign-in: tokens, or the MFA challenge. */
export const SignInResponse = z.union([TokenResponse, MfaRequiredResponse]);

/** A credential field of a public exchange: absent means empty, which the service refuses (401). */
export const credential = (description: string) => z.string().nullish().describe(description);

/** The token response of a TokenSet. */
export function tokenBody(t: TokenSet | undefined): z.infer<typeof TokenResponse> {
  return {
    access_token: t?.accessToken ?? '',
    token_type: t?.tokenType ?? 'Bearer',
    expires_in: t?.expiresIn ?? 0,
    ...(t?.refreshToken ? { refresh_token: t.refreshToken } : {}),
  };
}

/** The sign-in response of tokens or an MFA challenge. */
export function signInBody(
  r: { $case: 'tokens'; value: TokenSet } | { $case: 'mfa'; value: MfaChallenge } | undefined,
): z.infer<typeof SignInResponse> {
  if (r?.$case === 'mfa') {
    return { mfa_required: true, mfa_token: r.value.mfaToken, expires_in: r.value.expiresIn };
  }
  return tokenBody(r?.value);
}

const ProfileResponse = z.object({
  id: z.string(),
  email: z.string(),
  display_name: z.string(),
  auth_method: z.string(),
  role: z.enum(['owner', 'admin', 'member']),
  email_verified: z.boolean(),
  marketing_emails: z.boolean(),
  totp_enabled: z.boolean(),
  org_id: z.string(),
  created_at: dateTime,
});

function profileBody(p: UserProfile | undefined): z.infer<typeof ProfileResponse> {
  return {
    id: p?.id ?? '',
    email: p?.email ?? '',
    display_name: p?.displayName ?? '',
    auth_method: p?.authMethod ?? '',
    role: (p?.role ?? 'member') as 'owner' | 'admin' | 'member',
    email_verified: p?.emailVerified ?? false,
    marketing_emails: p?.marketingEmails ?? false,
    totp_enabled: p?.totpEnabled ?? false,
    org_id: p?.orgId ?? '',
    created_at: p?.createdAt ?? '',
  };
}

const SignupResponse = TokenResponse.partial().extend({
  message: z.string(),
  email: z.string(),
});

const JwtPublicKeyResponse = z.object({
  alg: z.literal('EdDSA'),
  kid: z.string(),
  public_key_base64: z.string().describe('The raw Ed25519 public key, standard base64'),
});

const JwksResponse = z.object({ keys: z.array(z.record(z.string(), z.unknown())) });

const OpenIdConfiguration = z.object({
  issuer: z.string(),
  jwks_uri: z.string(),
  token_endpoint: z.string(),
  grant_types_supported: z.array(z.string()),
  token_exchange_endpoint: z.string(),
  id_token_signing_alg_values_supported: z.array(z.string()),
  token_endpoint_auth_signing_alg_values_supported: z.array(z.string()),
  subject_types_supported: z.array(z.string()),
  response_types_supported: z.array(z.string()),
});

export const noStore = (res: Response) => res.setHeader('Cache-Control', 'no-store');

/** Sign-up, sign-in, tokens, profile and the public key documents (spec §4.1, §5). */
export function authRoutes(identity: IdentityServiceClient, keys: IdentityKeys, guards: Guards): Router {
  const router = Router();
  const call = unaryCaller(identity);
  const tag = 'auth';

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/signup',
      access: 'public',
      summary: 'Create an account (and its org); sign in at once unless e-mail verification is required',
      tag,
      body: bodyOf({
        email: z.string(),
        password: z.string().describe('At least 12 characters with upper, lower, digit and special'),
        display_name: z.string().nullable().optional(),
      }),
      responses: {
        201: { description: 'Account created', schema: SignupResponse },
        403: {
          description:
            '`signup_closed`: this install admits no signup (SIGNUP_MODE `invite`, after its first account, or `closed`)',
        },
      },
    },
    async (_req, res, { body }) => {
      const r = await call(identity.signup, {
        email: body.email,
        password: body.password,
        displayName: body.display_name ?? '',
      });
      noStore(res);
      res.status(201).json({ message: r.message, email: r.email, ...(r.tokens ? tokenBody(r.tokens) : {}) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/verify-email',
      access: 'public',
      summary: 'Verify the e-mail address with the e-mailed token, and sign in',
      tag,
      body: bodyOf({ token: z.string().describe('The `cse_` token from the e-mail') }),
      responses: { 200: { description: 'Signed in', schema: TokenResponse } },
    },
    async (_req, res, { body }) => {
      const r = await call(identity.verifyEmail, { token: body.token, withoutSession: false });
      noStore(res);
      res.json(tokenBody(r.tokens));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/token',
      access: 'public',
      summary: 'Sign in with e-mail and password (an MFA challenge when the user has TOTP)',
      tag,
      body: bodyOf({ email: credential('The account address'), password: credential('The password') }),
      responses: {
        200: { description: 'Tokens or an MFA challenge', schema: SignInResponse },
        429: {
          description:
            'Too many sign-ins from this client address, or `account_locked`: too many failed sign-ins of this account from any address within the lockout window (LOGIN_LOCKOUT_*), refused even with the right password until Retry-After or a password reset',
        },
      },
    },
    async (_req, res, { body }) => {
      const r = await call(identity.login, { email: body.email ?? '', password: body.password ?? '' });
      noStore(res);
      res.json(signInBody(r.result));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'delete',
      path: '/v1/auth/token',
      access: 'authenticated',
      summary: 'Sign out: the caller’s token (and its session) stop working',
      tag,
      responses: { 204: { description: 'Signed out' } },
    },
    async (_req, res) => {
      await call(identity.revokeSession, {});
      res.status(204).end();
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/refresh',
      access: 'public',
      summary: 'Rotate a refresh token (reuse revokes the session)',
      tag,
      body: bodyOf({ refresh_token: credential('The single-use refresh token') }),
      responses: { 200: { description: 'New tokens', schema: TokenResponse } },
    },
    async (_req, res, { body }) => {
      const r = await call(identity.refreshSession, { refreshToken: body.refresh_token ?? '' });
      noStore(res);
      res.json(tokenBody(r.tokens));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/auth/me',
      access: 'human',
      summary: 'The signed-in user’s profile',
      tag,
      responses: { 200: { description: 'The profile', schema: ProfileResponse } },
    },
    async (_req, res) => {
      const r = await call(identity.getProfile, {});
      res.json(profileBody(r.profile));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'patch',
      path: '/v1/auth/me',
      access: 'human',
      summary: 'Change the display name or the marketing preference',
      tag,
      body: bodyOf({
        display_name: z.string().nullable().optional().describe('null clears it'),
        marketing_emails: z.boolean().optional(),
      }),
      responses: { 200: { description: 'The profile after the change', schema: ProfileResponse } },
    },
    async (_req, res, { body }) => {
      const r = await call(identity.updateProfile, {
        ...(body.display_name !== undefined ? { displayName: body.display_name ?? '' } : {}),
        ...(body.marketing_emails !== undefined ? { marketingEmails: body.marketing_emails } : {}),
      });
      res.json(profileBody(r.profile));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/auth/jwt-public-key',
      access: 'public',
      summary: 'The public key that verifies new access tokens',
      tag,
      responses: { 200: { description: 'The active key', schema: JwtPublicKeyResponse } },
    },
    async (_req, res) => {
      const k = await keys.activeKey();
      res.json({
        alg: 'EdDSA',
        kid: k.kid,
        public_key_base64: Buffer.from(k.x, 'base64url').toString('base64'),
      } satisfies z.infer<typeof JwtPublicKeyResponse>);
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/.well-known/jwks.json',
      access: 'public',
      summary: 'The JSON Web Key Set of every key whose tokens still validate',
      tag,
      responses: {
        200: { description: 'The key set', schema: JwksResponse, contentType: 'application/jwk-set+json' },
      },
    },
    async (_req, res) => {
      const jwks = await keys.jwks();
      res.setHeader('Cache-Control', 'public, max-age=300');
      res.setHeader('Access-Control-Allow-Origin', '*');
      res.type('application/jwk-set+json').send(JSON.stringify(jwks));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/.well-known/openid-configuration',
      access: 'public',
      summary: 'OpenID provider metadata',
      tag,
      responses: { 200: { description: 'The metadata', schema: OpenIdConfiguration } },
    },
    async (_req, res) => {
      const issuer = keys.trust.issuers[0]!;
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
      } satisfies z.infer<typeof OpenIdConfiguration>);
    },
  );

  return router;
}
