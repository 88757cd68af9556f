import { type Request, type RequestHandler, type Response, Router } from 'express';
import { type AccountSettings, AccountServiceClient } from '@custos/proto/custos/identity/v1/account';
import { InvalidArgumentError, type callUnary, unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { body, str } from './auth-routes.js';
import { declareUncheckedRoute } from './routes.js';
import { authConfirmOf, setRetryAfter } from './step-up.js';

const noStore = (res: Response) => res.setHeader('Cache-Control', 'no-store');

function settingsBody(s: AccountSettings | undefined) {
  return {
    require_passkey_for_vaults: s?.requirePasskeyForVaults ?? false,
    require_passkey_for_mfa: s?.requirePasskeyForMfa ?? false,
    passkey_count: s?.passkeyCount ?? 0,
    passkey_requirements_downgraded: s?.passkeyRequirementsDowngraded ?? false,
  };
}

/** An optional boolean field: undefined when absent, a 400 naming it when it has another type. */
function optionalBool(b: Record<string, unknown>, field: string): boolean | undefined {
  const v = b[field];
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw new InvalidArgumentError(field, `${field} must be a boolean`);
  return v;
}

/**
 * The account of the signed-in user (SPEC.md §4.1): password reset, change and first set, e-mail
 * change, re-authentication, deletion, security settings and feature quotas.
 */
export function accountRoutes(
  peers: Peers,
  guards: { authenticated: RequestHandler[]; human: RequestHandler[] },
): Router {
  const router = Router();
  const account = peers.client(AccountServiceClient, 'identity');
  const call = unaryCaller(account);
  /** A call that may meet the re-auth lockout, whose 429 carries Retry-After. */
  const guarded = async <Req, Res>(
    res: Response,
    method: Parameters<typeof callUnary<Req, Res>>[1],
    request: Req,
  ): Promise<Res> => {
    try {
      return await call(method, request);
    } catch (err) {
      setRetryAfter(res, err);
      throw err;
    }
  };

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/forgot-password', 'public', async (req, res) => {
    const r = await call(account.forgotPassword, { email: str(body(req), 'email') });
    // `status` is the same for every address (the reference's other values would reveal accounts).
    res.json({ message: r.message, status: 'email_sent' });
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/reset-password', 'public', async (req, res) => {
    const b = body(req);
    const r = await call(account.resetPassword, {
      token: str(b, 'token'),
      newPassword: str(b, 'new_password'),
    });
    res.json({ message: r.message });
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/change-password', 'human', async (req, res) => {
    const b = body(req);
    await guarded(res, account.changePassword, {
      currentPassword: str(b, 'current_password'),
      newPassword: str(b, 'new_password'),
    });
    res.status(204).end();
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/set-password', 'human', async (req, res) => {
    const b = body(req);
    const r = await call(account.setPassword, {
      password: str(b, 'password'),
      passwordConfirm: str(b, 'password_confirm'),
    });
    res.json({ message: r.message });
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/change-email', 'human', async (req, res) => {
    const r = await call(account.changeEmail, { newEmail: str(body(req), 'new_email') });
    res.json({ message: r.message, new_email: r.newEmail, expires_in_seconds: r.expiresInSeconds });
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/verify-email-change', 'human', async (req, res) => {
    const r = await call(account.verifyEmailChange, { code: str(body(req), 'code') });
    res.json({ message: r.message, email: r.email });
  });

  declareUncheckedRoute(router, guards, 'post', '/v1/auth/reauth', 'human', async (req, res) => {
    const b = body(req);
    const assertion = b['passkey_assertion'];
    const r = await guarded(res, account.reauthenticate, {
      purpose: str(b, 'purpose'),
      password: str(b, 'password'),
      totpCode: str(b, 'totp_code'),
      passkeyAssertionPresent: assertion !== undefined && assertion !== null,
    });
    noStore(res);
    res.json({ token: r.token, purpose: r.purpose, expires_in: r.expiresIn });
  });

  declareUncheckedRoute(router, guards, 'delete', '/v1/auth/me', 'human', async (req: Request, res) => {
    const b = body(req);
    await guarded(res, account.deleteAccount, {
      confirmation: str(b, 'confirmation'),
      credential: authConfirmOf(req),
    });
    res.status(204).end();
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/auth/settings', 'human', async (_req, res) => {
    const r = await call(account.getAccountSettings, {});
    res.json(settingsBody(r.settings));
  });

  declareUncheckedRoute(router, guards, 'patch', '/v1/auth/settings', 'human', async (req, res) => {
    const b = body(req);
    const vaults = optionalBool(b, 'require_passkey_for_vaults');
    const mfa = optionalBool(b, 'require_passkey_for_mfa');
    const r = await call(account.updateAccountSettings, {
      ...(vaults !== undefined ? { requirePasskeyForVaults: vaults } : {}),
      ...(mfa !== undefined ? { requirePasskeyForMfa: mfa } : {}),
    });
    res.json(settingsBody(r.settings));
  });

  declareUncheckedRoute(
    router,
    guards,
    'post',
    '/v1/auth/feature-quota/consume',
    'human',
    async (req, res) => {
      const r = await call(account.consumeFeatureQuota, { feature: str(body(req), 'feature') });
      res.json({ allowed: r.allowed, limit: r.limit, remaining: r.remaining, reset_at: r.resetAt });
    },
  );

  return router;
}
