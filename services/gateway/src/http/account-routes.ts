import { Router } from 'express';
import { z } from 'zod/v4';
import { type AccountSettings, AccountServiceClient } from '@custos/proto/custos/identity/v1/account';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { noStore } from './auth-routes.js';
import { type Guards, declareRoute } from './routes.js';
import { MessageResponse, bodyOf, dateTime } from './schemas.js';
import { STEP_UP_PURPOSES, authConfirmOf } from './step-up.js';

const SettingsResponse = z.object({
  require_passkey_for_vaults: z.boolean(),
  require_passkey_for_mfa: z.boolean(),
  passkey_count: z.number().int(),
  passkey_requirements_downgraded: z.boolean(),
});

function settingsBody(s: AccountSettings | undefined): z.infer<typeof SettingsResponse> {
  return {
    require_passkey_for_vaults: s?.requirePasskeyForVaults ?? false,
    require_passkey_for_mfa: s?.requirePasskeyForMfa ?? false,
    passkey_count: s?.passkeyCount ?? 0,
    passkey_requirements_downgraded: s?.passkeyRequirementsDowngraded ?? false,
  };
}

/** A string field identity checks itself (format, policy); absent reads as empty. */
const text = (description: string) => z.string().nullish().describe(description);

/**
 * The account of the signed-in user (SPEC.md §4.1): password reset, change and first set, e-mail
 * change, re-authentication, deletion, security settings and feature quotas. Identity's lockouts
 * arrive as 429 with `retry_after`, which the error handler turns into `Retry-After`.
 */
export function accountRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const account = peers.client(AccountServiceClient, 'identity');
  const call = unaryCaller(account);
  const tag = 'account';

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/forgot-password',
      access: 'public',
      summary: 'E-mail a password-reset link (the answer is the same for every address)',
      tag,
      body: bodyOf({ email: text('The account address') }),
      responses: {
        200: {
          description: 'Accepted',
          schema: MessageResponse.extend({ status: z.literal('email_sent') }),
        },
      },
    },
    async (_req, res, { body }) => {
      const r = await call(account.forgotPassword, { email: body.email ?? '' });
      // `status` is the same for every address (the reference's other values would reveal accounts).
      res.json({ message: r.message, status: 'email_sent' });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/reset-password',
      access: 'public',
      summary: 'Set a new password with the e-mailed reset token; every session ends',
      tag,
      body: bodyOf({
        token: text('The `cse_` token from the e-mail'),
        new_password: text('The new password'),
      }),
      responses: { 200: { description: 'Password updated', schema: MessageResponse } },
    },
    async (_req, res, { body }) => {
      const r = await call(account.resetPassword, {
        token: body.token ?? '',
        newPassword: body.new_password ?? '',
      });
      res.json({ message: r.message });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/change-password',
      access: 'human',
      summary: 'Change the password; every session, the caller’s included, ends',
      tag,
      stepUp: STEP_UP_PURPOSES.passwordChange,
      body: bodyOf({ current_password: text('The password now'), new_password: text('The new password') }),
      responses: { 204: { description: 'Changed' } },
    },
    async (req, res, { body }) => {
      await call(account.changePassword, {
        currentPassword: body.current_password ?? '',
        newPassword: body.new_password ?? '',
        credential: authConfirmOf(req),
      });
      res.status(204).end();
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/set-password',
      access: 'human',
      summary: 'Set the first password of an account that has none',
      tag,
      stepUp: STEP_UP_PURPOSES.passwordSet,
      body: bodyOf({ password: text('The password'), password_confirm: text('The same password again') }),
      responses: { 200: { description: 'Password set', schema: MessageResponse } },
    },
    async (req, res, { body }) => {
      const r = await call(account.setPassword, {
        password: body.password ?? '',
        passwordConfirm: body.password_confirm ?? '',
        credential: authConfirmOf(req),
      });
      res.json({ message: r.message });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/change-email',
      access: 'human',
      summary: 'Start an e-mail change: a 6-digit code goes to the new address',
      tag,
      stepUp: STEP_UP_PURPOSES.emailChange,
      body: bodyOf({ new_email: text('The new address') }),
      responses: {
        200: {
          description: 'Code sent',
          schema: MessageResponse.extend({ new_email: z.string(), expires_in_seconds: z.number().int() }),
        },
      },
    },
    async (req, res, { body }) => {
      const r = await call(account.changeEmail, {
        newEmail: body.new_email ?? '',
        credential: authConfirmOf(req),
      });
      res.json({ message: r.message, new_email: r.newEmail, expires_in_seconds: r.expiresInSeconds });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/verify-email-change',
      access: 'human',
      summary:
        'Complete the e-mail change with its code; the old address is told, with a link to undo it (7 days)',
      tag,
      body: bodyOf({ code: text('The 6-digit code') }),
      responses: {
        200: { description: 'Address changed', schema: MessageResponse.extend({ email: z.string() }) },
      },
    },
    async (_req, res, { body }) => {
      const r = await call(account.verifyEmailChange, { code: body.code ?? '' });
      res.json({ message: r.message, email: r.email });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/undo-email-change',
      access: 'public',
      summary:
        'Undo an e-mail change with the token mailed to the replaced address (7 days, once): the address is restored and every session and personal API key ends',
      tag,
      body: bodyOf({ token: text('The `cse_` token from the notice') }),
      responses: {
        200: { description: 'Address restored', schema: MessageResponse.extend({ email: z.string() }) },
      },
    },
    async (_req, res, { body }) => {
      const r = await call(account.undoEmailChange, { token: body.token ?? '' });
      noStore(res);
      res.json({ message: r.message, email: r.email });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/reauth',
      access: 'human',
      summary: 'Prove the user again for a purpose: a single-use `rat_` token (5 minutes)',
      tag,
      body: bodyOf({
        purpose: text('What the token authorises, e.g. `account.delete`'),
        password: text('The password'),
        totp_code: text('A current TOTP code, when TOTP is enrolled (each code is accepted once)'),
        passkey_assertion: z.unknown().optional().describe('A passkey assertion (not accepted yet)'),
      }),
      responses: {
        200: {
          description: 'The token, shown only here',
          schema: z.object({ token: z.string(), purpose: z.string(), expires_in: z.number().int() }),
        },
      },
    },
    async (_req, res, { body }) => {
      const r = await call(account.reauthenticate, {
        purpose: body.purpose ?? '',
        password: body.password ?? '',
        totpCode: body.totp_code ?? '',
        passkeyAssertionPresent: body.passkey_assertion !== undefined && body.passkey_assertion !== null,
      });
      noStore(res);
      res.json({ token: r.token, purpose: r.purpose, expires_in: r.expiresIn });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'delete',
      path: '/v1/auth/me',
      access: 'human',
      summary: 'Delete the caller’s account (confirmation phrase and step-up for `account.delete`)',
      tag,
      stepUp: STEP_UP_PURPOSES.accountDelete,
      body: bodyOf({ confirmation: text('Exactly `DELETE MY ACCOUNT`') }),
      responses: { 204: { description: 'Deleted' } },
    },
    async (req, res, { body }) => {
      await call(account.deleteAccount, {
        confirmation: body.confirmation ?? '',
        credential: authConfirmOf(req),
      });
      res.status(204).end();
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/auth/settings',
      access: 'human',
      summary: 'The caller’s security settings',
      tag,
      responses: { 200: { description: 'The settings', schema: SettingsResponse } },
    },
    async (_req, res) => {
      const r = await call(account.getAccountSettings, {});
      res.json(settingsBody(r.settings));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'patch',
      path: '/v1/auth/settings',
      access: 'human',
      summary: 'Change the security settings that are present',
      tag,
      body: bodyOf({
        require_passkey_for_vaults: z.boolean().optional(),
        require_passkey_for_mfa: z.boolean().optional(),
      }),
      responses: { 200: { description: 'The settings after the change', schema: SettingsResponse } },
    },
    async (_req, res, { body }) => {
      const r = await call(account.updateAccountSettings, {
        requirePasskeyForVaults: body.require_passkey_for_vaults,
        requirePasskeyForMfa: body.require_passkey_for_mfa,
      });
      res.json(settingsBody(r.settings));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/feature-quota/consume',
      access: 'human',
      summary: 'Use one call of a metered feature in the current hour',
      tag,
      body: bodyOf({ feature: text('The feature; only `voice_brief` exists') }),
      responses: {
        200: {
          description: 'Whether the call was allowed and what is left',
          schema: z.object({
            allowed: z.boolean(),
            limit: z.number().int(),
            remaining: z.number().int(),
            reset_at: dateTime,
          }),
        },
      },
    },
    async (_req, res, { body }) => {
      const r = await call(account.consumeFeatureQuota, { feature: body.feature ?? '' });
      res.json({ allowed: r.allowed, limit: r.limit, remaining: r.remaining, reset_at: r.resetAt });
    },
  );

  return router;
}
