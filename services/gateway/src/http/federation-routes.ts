import express, { type RequestHandler, type Response, Router } from 'express';
import { FederationServiceClient } from '@custos/proto/custos/identity/v1/federation';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { body, str, tokenBody } from './auth-routes.js';
import { declareUncheckedRoute } from './routes.js';

const noStore = (res: Response) => res.setHeader('Cache-Control', 'no-store');

/**
 * Federated tokens (RFC 8693 token exchange, spec §4.1 and §5.6) and Google sign-in. Both are
 * public: the credential travels in the body.
 */
export function federationRoutes(
  peers: Peers,
  guards: { authenticated: RequestHandler[]; human: RequestHandler[] },
): Router {
  const router = Router();
  const federation = peers.client(FederationServiceClient, 'identity');
  const call = unaryCaller(federation);

  // RFC 8693 clients send a form (RFC 6749 §4.1.3 style); the app parses only JSON elsewhere.
  router.post('/v1/auth/federated-token', express.urlencoded({ extended: false, limit: '64kb' }));
  declareUncheckedRoute(router, guards, 'post', '/v1/auth/federated-token', 'public', async (req, res) => {
    const b = body(req);
    const r = await call(federation.exchangeFederatedToken, {
      grantType: str(b, 'grant_type'),
      subjectToken: str(b, 'subject_token'),
      subjectTokenType: str(b, 'subject_token_type'),
      audience: str(b, 'audience'),
      scope: str(b, 'scope'),
      requestedTokenType: str(b, 'requested_token_type'),
    });
    noStore(res);
    res.json({
      access_token: r.accessToken,
      issued_token_type: r.issuedTokenType,
      token_type: r.tokenType,
      expires_in: r.expiresIn,
      scope: r.scope,
    });
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/google', 'public', async (req, res) => {
    const r = await call(federation.googleSignIn, { idToken: str(body(req), 'id_token') });
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

  return router;
}
