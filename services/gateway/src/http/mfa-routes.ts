import { Router } from 'express';
import { z } from 'zod/v4';
import { MfaServiceClient } from '@custos/proto/custos/identity/v1/mfa';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { TokenResponse, credential, noStore, tokenBody } from './auth-routes.js';
import { type Guards, declareRoute } from './routes.js';
import { STEP_UP_PURPOSES, authConfirmOf } from './step-up.js';
import { bodyOf } from './schemas.js';

const StatusResponse = z.object({ enabled: z.boolean(), recovery_codes_remaining: z.number().int() });
const code = z.string().optional().describe('A 6-digit TOTP code or a recovery code');

/**
 * TOTP multi-factor authentication (DECISIONS.md "MFA"): enrolment, status and removal for the
 * signed-in human, and the public second step of a password sign-in that answered `mfa_required`.
 * Identity's limit on invalid codes arrives as 429 with `retry_after` (the error handler sets
 * `Retry-After` from it).
 */
export function mfaRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const mfa = peers.client(MfaServiceClient, 'identity');
  const call = unaryCaller(mfa);
  const tag = 'mfa';

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/mfa/setup',
      access: 'human',
      summary: 'Start TOTP enrolment: a new secret and its otpauth URI',
      tag,
      stepUp: STEP_UP_PURPOSES.mfaEnrol,
      responses: {
        200: {
          description: 'The pending secret',
          schema: z.object({ secret: z.string().describe('Base32'), otpauth_uri: z.string() }),
        },
      },
    },
    async (req, res) => {
      const r = await call(mfa.setupMfa, { credential: authConfirmOf(req) });
      noStore(res);
      res.json({ secret: r.secret, otpauth_uri: r.otpauthUri });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/mfa/verify-setup',
      access: 'human',
      summary: 'Confirm enrolment with a code; recovery codes are shown only here',
      tag,
      body: bodyOf({ code }),
      responses: {
        200: {
          description: 'TOTP enabled',
          schema: z.object({ enabled: z.literal(true), recovery_codes: z.array(z.string()) }),
        },
      },
    },
    async (_req, res, { body }) => {
      const r = await call(mfa.verifyMfaSetup, { code: body.code ?? '' });
      noStore(res);
      res.json({ enabled: true, recovery_codes: r.recoveryCodes });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/mfa/verify',
      access: 'public',
      summary: 'Complete a sign-in that answered `mfa_required`',
      tag,
      body: bodyOf({ mfa_token: credential('The `mfa_token` of the sign-in'), code }),
      responses: { 200: { description: 'Signed in', schema: TokenResponse } },
    },
    async (_req, res, { body }) => {
      noStore(res);
      const r = await call(mfa.verifyMfa, { mfaToken: body.mfa_token ?? '', code: body.code ?? '' });
      res.json(tokenBody(r.tokens));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/auth/mfa/status',
      access: 'human',
      summary: 'Whether TOTP is enabled and how many recovery codes are left',
      tag,
      responses: { 200: { description: 'The status', schema: StatusResponse } },
    },
    async (_req, res) => {
      const r = await call(mfa.getMfaStatus, {});
      res.json({ enabled: r.enabled, recovery_codes_remaining: r.recoveryCodesRemaining });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/mfa/disable',
      access: 'human',
      summary: 'Turn TOTP off with a TOTP or recovery code',
      tag,
      stepUp: STEP_UP_PURPOSES.mfaDisable,
      body: bodyOf({ code }),
      responses: { 200: { description: 'TOTP disabled', schema: StatusResponse } },
    },
    async (req, res, { body }) => {
      await call(mfa.disableMfa, { code: body.code ?? '', credential: authConfirmOf(req) });
      res.json({ enabled: false, recovery_codes_remaining: 0 });
    },
  );

  return router;
}
