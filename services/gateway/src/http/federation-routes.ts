import express, { Router } from 'express';
import { z } from 'zod/v4';
import { FederationServiceClient } from '@custos/proto/custos/identity/v1/federation';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { SignInResponse, credential, noStore, signInBody } from './auth-routes.js';
import { type Guards, declareRoute } from './routes.js';
import { bodyOf } from './schemas.js';

const TokenExchangeResponse = z.object({
  access_token: z.string().describe('The RS256 federated token'),
  issued_token_type: z.literal('urn:ietf:params:oauth:token-type:jwt'),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int(),
  scope: z.string().describe('The space-separated scopes the token carries'),
});

const field = (description: string) => z.string().nullish().describe(description);

/**
 * Federated tokens (RFC 8693 token exchange, spec §4.1 and §5.6) and Google sign-in. Both are
 * public: the credential travels in the body.
 */
export function federationRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const federation = peers.client(FederationServiceClient, 'identity');
  const call = unaryCaller(federation);

  // RFC 8693 clients send a form (RFC 6749 §4.1.3 style); the app parses only JSON elsewhere.
  router.post('/v1/auth/federated-token', express.urlencoded({ extended: false, limit: '64kb' }));
  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/federated-token',
      access: 'public',
      summary: 'RFC 8693 token exchange: an agent JWT or `ocv_` key for an RS256 token to a relying party',
      tag: 'auth',
      // Not strict: RFC 6749 §3.2 has the server ignore parameters it does not know (RFC 8693's
      // resource, actor_token, client_id …).
      body: z.object({
        grant_type: field('`urn:ietf:params:oauth:grant-type:token-exchange`'),
        subject_token: field('The agent JWT or `ocv_` key'),
        subject_token_type: field(
          '`urn:ietf:params:oauth:token-type:jwt` or `urn:1claw:params:oauth:token-type:api-key`',
        ),
        audience: field('One of the agent’s `federation_audiences`'),
        scope: field('Space-separated subset of the agent’s scopes; empty: all of them'),
        requested_token_type: field('Only `urn:ietf:params:oauth:token-type:jwt`'),
      }),
      responses: { 200: { description: 'The federated token', schema: TokenExchangeResponse } },
    },
    async (_req, res, { body }) => {
      const r = await call(federation.exchangeFederatedToken, {
        grantType: body.grant_type ?? '',
        subjectToken: body.subject_token ?? '',
        subjectTokenType: body.subject_token_type ?? '',
        audience: body.audience ?? '',
        scope: body.scope ?? '',
        requestedTokenType: body.requested_token_type ?? '',
      });
      noStore(res);
      res.json({
        access_token: r.accessToken,
        issued_token_type: r.issuedTokenType as 'urn:ietf:params:oauth:token-type:jwt',
        token_type: r.tokenType as 'Bearer',
        expires_in: r.expiresIn,
        scope: r.scope,
      } satisfies z.infer<typeof TokenExchangeResponse>);
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/google',
      access: 'public',
      summary: 'Sign in with a Google ID token (the account is created on first use)',
      tag: 'auth',
      body: bodyOf({ id_token: credential('The Google ID token') }),
      responses: {
        200: { description: 'Tokens or an MFA challenge', schema: SignInResponse },
        403: {
          description:
            '`signup_closed`: the address has no account and this install admits no new one (SIGNUP_MODE)',
        },
      },
    },
    async (_req, res, { body }) => {
      const r = await call(federation.googleSignIn, { idToken: body.id_token ?? '' });
      noStore(res);
      res.json(signInBody(r.result));
    },
  );

  return router;
}
