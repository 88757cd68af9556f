import type { Database, Logger } from '@custos/service-kit';
import { AccountStore } from '../account/account-store.js';
import { DeletionService } from '../account/deletion-service.js';
import { EmailChangeService } from '../account/email-change-service.js';
import { PasswordService } from '../account/password-service.js';
import { QuotaService } from '../account/quota-service.js';
import { ReauthService } from '../account/reauth-service.js';
import { SettingsService } from '../account/settings-service.js';
import { GoogleIdTokenVerifier } from '../google/google-id-token.js';
import { GoogleSignInService } from '../google/google-signin-service.js';
import { GoogleStore } from '../google/google-store.js';
import { PersonalKeyService } from '../keys/personal-key-service.js';
import { PersonalKeyStore } from '../keys/personal-key-store.js';
import { MfaChallengeIssuer } from '../mfa/mfa-challenges.js';
import { MfaService } from '../mfa/mfa-service.js';
import { MfaStore } from '../mfa/mfa-store.js';
import { TotpStepUpCodes } from '../mfa/totp-step-up.js';
import type { Notifier } from '../notifications/notifier.js';
import { AdminService } from '../orgs/admin-service.js';
import { AdminStore } from '../orgs/admin-store.js';
import { InviteService } from '../orgs/invite-service.js';
import { OrgService } from '../orgs/org-service.js';
import { OrgStore } from '../orgs/org-store.js';
import { AccountGate, type AccountGateOptions } from '../users/account-gate.js';
import { ProfileService } from '../users/profile-service.js';
import { SessionService } from '../users/session-service.js';
import { SignupService } from '../users/signup-service.js';
import { LoginThrottle, type LoginThrottleOptions } from '../users/login-throttle.js';
import { UserStore } from '../users/user-store.js';
import type { Tokens } from './tokens.js';

/** What the people slice is configured with. */
export interface PeopleSettings {
  refreshTtlSeconds: number;
  /** Absolute lifetime of a session (REFRESH_TOKEN_FAMILY_TTL_SECONDS). */
  familyTtlSeconds: number;
  /** Who may create an account (SIGNUP_MODE, and whether PLATFORM_ADMIN_EMAILS names anyone). */
  signups: AccountGateOptions;
  verificationTtlSeconds: number;
  requireEmailVerification: boolean;
  maxPendingInvites: number;
  /** Key that seals TOTP secrets at rest (MFA_SECRET_KEY). */
  totpKek: Buffer;
  google: { clientIds: string[]; issuers: string[]; jwksUrl: string };
  /** Per-account protection of password sign-in (LOGIN_LOCKOUT_*, LOGIN_DELAY_*). */
  loginThrottle: LoginThrottleOptions;
}

/**
 * Builds the rules about people: signup and e-mail verification, sessions, the profile, personal
 * API keys, MFA, the account (passwords, e-mail change, re-auth, deletion, settings, quotas), the
 * org (members, invitations, sub-orgs, platform admin) and Google sign-in.
 */
export function buildPeople(deps: {
  db: Database;
  tokens: Tokens;
  notifier: Notifier;
  settings: PeopleSettings;
  logger: Logger;
}) {
  const { db, tokens, notifier, settings, logger } = deps;
  const users = new UserStore(db);
  const mfaStore = new MfaStore(db);
  const loginThrottle = new LoginThrottle(db, settings.loginThrottle);
  const sessions = new SessionService(
    users,
    tokens.issuer,
    tokens.revocations,
    new MfaChallengeIssuer(mfaStore),
    { refreshTtlSeconds: settings.refreshTtlSeconds, familyTtlSeconds: settings.familyTtlSeconds },
    logger,
    loginThrottle,
  );
  const accountStore = new AccountStore(db);
  const reauth = new ReauthService(
    accountStore,
    users,
    logger,
    new TotpStepUpCodes(mfaStore, settings.totpKek),
  );
  const orgStore = new OrgStore(db);
  const gate = new AccountGate(users, settings.signups);
  const google =
    settings.google.clientIds.length > 0 ? new GoogleIdTokenVerifier(settings.google) : undefined;
  return {
    sessions,
    signups: new SignupService(
      users,
      sessions,
      notifier,
      {
        verificationTtlSeconds: settings.verificationTtlSeconds,
        requireEmailVerification: settings.requireEmailVerification,
      },
      logger,
      gate,
    ),
    profiles: new ProfileService(users),
    keys: new PersonalKeyService(
      new PersonalKeyStore(db),
      users,
      tokens.issuer,
      tokens.revocations,
      reauth,
      tokens.wrongSecrets,
    ),
    mfa: new MfaService(mfaStore, sessions, { kek: settings.totpKek }, reauth),
    account: {
      passwords: new PasswordService(
        accountStore,
        users,
        reauth,
        tokens.revocations,
        notifier,
        logger,
        loginThrottle,
      ),
      reauth,
      emailChange: new EmailChangeService(accountStore, users, notifier, logger, reauth, tokens.revocations),
      deletion: new DeletionService(accountStore, reauth, tokens.revocations, logger),
      settings: new SettingsService(accountStore),
      quota: new QuotaService(accountStore),
    },
    orgs: {
      orgs: new OrgService(orgStore, tokens.issuer, tokens.revocations, reauth),
      invites: new InviteService(
        orgStore,
        notifier,
        { maxPendingInvites: settings.maxPendingInvites },
        logger,
        gate,
      ),
      admin: new AdminService(new AdminStore(db), orgStore, tokens.issuer, tokens.revocations),
    },
    google: new GoogleSignInService(google, users, new GoogleStore(db), sessions, gate),
  };
}
