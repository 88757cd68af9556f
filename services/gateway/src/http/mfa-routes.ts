import { type RequestHandler, type Response, Router } from 'express';
import { MfaServiceClient } from '@custos/proto/custos/identity/v1/mfa';
import { CustosError, unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { body, str, tokenBody } from './auth-routes.js';
import { declareUncheckedRoute } from './routes.js';

const noStore = (res: Response) => res.setHeader('Cache-Control', 'no-store');

/**
 * TOTP multi-factor authentication (DECISIONS.md "MFA"): enrolment, status and removal for the
 * signed-in human, and the public second step of a password sign-in that answered `mfa_required`.
 */
export function mfaRoutes(
  peers: Peers,
  guards: { authenticated: RequestHandler[]; human: RequestHandler[] },
): Router {
  const router = Router();
  const mfa = peers.client(MfaServiceClient, 'identity');
  const call = unaryCaller(mfa);

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/mfa/setup', 'human', async (_req, res) => {
    const r = await call(mfa.setupMfa, {});
    noStore(res);
    res.json({ secret: r.secret, otpauth_uri: r.otpauthUri });
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/mfa/verify-setup', 'human', async (req, res) => {
    const r = await call(mfa.verifyMfaSetup, { code: str(body(req), 'code') });
    noStore(res);
    res.json({ enabled: true, recovery_codes: r.recoveryCodes });
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/mfa/verify', 'public', async (req, res) => {
    const b = body(req);
    noStore(res);
    try {
      const r = await call(mfa.verifyMfa, { mfaToken: str(b, 'mfa_token'), code: str(b, 'code') });
      res.json(tokenBody(r.tokens));
    } catch (err) {
      // Identity's per-user limit on invalid codes arrives as problem details; its hint also goes
      // in the header clients look for.
      const retryAfter = err instanceof CustosError ? err.extensions['retry_after'] : undefined;
      if (retryAfter && (err as CustosError).kind === 'rate_limited')
        res.setHeader('Retry-After', retryAfter);
      throw err;
    }
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/auth/mfa/status', 'human', async (_req, res) => {
    const r = await call(mfa.getMfaStatus, {});
    res.json({ enabled: r.enabled, recovery_codes_remaining: r.recoveryCodesRemaining });
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/mfa/disable', 'human', async (req, res) => {
    await call(mfa.disableMfa, { code: str(body(req), 'code') });
    res.json({ enabled: false, recovery_codes_remaining: 0 });
  });

  return router;
}
