import type { TokenVerifier } from '@custos/auth';
import type { AccountServiceServer, AccountSettings } from '@custos/proto/custos/identity/v1/account';
import type { AsyncService } from '@custos/service-kit';
import { callerResolver } from './caller.js';
import type { DeletionService } from '../account/deletion-service.js';
import type { EmailChangeService } from '../account/email-change-service.js';
import type { PasswordService } from '../account/password-service.js';
import type { QuotaService } from '../account/quota-service.js';
import type { ReauthService } from '../account/reauth-service.js';
import type { SettingsService, SettingsView } from '../account/settings-service.js';

function settings(s: SettingsView): AccountSettings {
  return {
    requirePasskeyForVaults: s.requirePasskeyForVaults,
    requirePasskeyForMfa: s.requirePasskeyForMfa,
    passkeyCount: s.passkeyCount,
    passkeyRequirementsDowngraded: s.passkeyRequirementsDowngraded,
  };
}

/** gRPC adapter of AccountService: decode, call the rules, encode. */
export function accountGrpc(deps: {
  passwords: PasswordService;
  reauth: ReauthService;
  emailChange: EmailChangeService;
  deletion: DeletionService;
  settings: SettingsService;
  quota: QuotaService;
  verifier: TokenVerifier;
}): AsyncService<AccountServiceServer> {
  const caller = callerResolver(deps.verifier);

  return {
    async forgotPassword(req) {
      deps.passwords.forgotPassword(req.email);
      return { message: 'If an account with a password has this address, a link to reset it is on its way.' };
    },
    async resetPassword(req) {
      await deps.passwords.resetPassword(req.token, req.newPassword);
      return { message: 'Password updated. Sign in with the new password.' };
    },
    async changePassword(req, call) {
      await deps.passwords.changePassword(
        await caller(call),
        req.currentPassword,
        req.newPassword,
        req.credential,
      );
      return {};
    },
    async setPassword(req, call) {
      await deps.passwords.setPassword(await caller(call), req.password, req.passwordConfirm, req.credential);
      return { message: 'Password set.' };
    },
    async changeEmail(req, call) {
      const r = await deps.emailChange.request(await caller(call), req.newEmail, req.credential);
      return {
        message: 'A 6-digit code was sent to the new address.',
        newEmail: r.newEmail,
        expiresInSeconds: r.expiresInSeconds,
      };
    },
    async verifyEmailChange(req, call) {
      const email = await deps.emailChange.verify(await caller(call), req.code);
      return { message: 'E-mail address updated.', email };
    },
    async reauthenticate(req, call) {
      return deps.reauth.reauthenticate(await caller(call), {
        purpose: req.purpose,
        password: req.password,
        totpCode: req.totpCode,
        passkeyAssertionPresent: req.passkeyAssertionPresent,
      });
    },
    async confirmStepUp(req, call) {
      await deps.reauth.confirmStepUp(await caller(call), req.purpose, req.credential);
      return {};
    },
    async confirmUserStepUp(req) {
      // The calling service (allow-listed: vault-crypto, signer, approvals) verified the user's
      // access token itself; it learns which credential was proved.
      const method = await deps.reauth.confirmUserStepUp(req.userId, req.orgId, req.purpose, req.credential);
      return { method };
    },
    async undoEmailChange(req) {
      const email = await deps.emailChange.undo(req.token);
      return {
        message: 'The e-mail address is restored; every session and personal API key of the account ended.',
        email,
      };
    },
    async deleteAccount(req, call) {
      await deps.deletion.deleteAccount(await caller(call), req.confirmation, req.credential);
      return {};
    },
    async getAccountSettings(_req, call) {
      return { settings: settings(await deps.settings.get(await caller(call))) };
    },
    async updateAccountSettings(req, call) {
      const s = await deps.settings.update(await caller(call), {
        ...(req.requirePasskeyForVaults !== undefined
          ? { requirePasskeyForVaults: req.requirePasskeyForVaults }
          : {}),
        ...(req.requirePasskeyForMfa !== undefined ? { requirePasskeyForMfa: req.requirePasskeyForMfa } : {}),
      });
      return { settings: settings(s) };
    },
    async consumeFeatureQuota(req, call) {
      const q = await deps.quota.consume(await caller(call), req.feature);
      return { allowed: q.allowed, limit: q.limit, remaining: q.remaining, resetAt: q.resetAt.toISOString() };
    },
  };
}
