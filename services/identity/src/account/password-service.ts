import type { Principal } from '@custos/auth';
import { InvalidArgumentError, UnauthenticatedError, type Logger, describeError } from '@custos/service-kit';
import { audit } from '../audit/identity-audit.js';
import { checkPasswordPolicy, hashPassword } from '../credentials/password-fns.js';
import {
  SECRET_TOKEN_PREFIXES,
  generateSecretToken,
  parseSecretToken,
  secretMatches,
} from '../credentials/secret-token-fns.js';
import type { Notifier } from '../notifications/notifier.js';
import type { RevocationStore } from '../tokens/revocation-store.js';
import { normalizeEmail } from '../users/user-fns.js';
import type { LoginThrottle } from '../users/login-throttle.js';
import type { UserStore } from '../users/user-store.js';
import {
  PASSWORD_CHANGE_PURPOSE,
  PASSWORD_SET_PURPOSE,
  RESET_EMAILS_PER_HOUR,
  RESET_TOKEN_TTL_SECONDS,
  requireUser,
} from './account-fns.js';
import { revokeUserEverywhere, waitPastRevocation } from './account-sessions.js';
import type { AccountStore } from './account-store.js';
import type { ReauthService } from './reauth-service.js';

const EMAIL_TOKEN_PREFIX = SECRET_TOKEN_PREFIXES.email;
const RESET_PURPOSE = 'reset_password';
const BAD_RESET_TOKEN = 'invalid or expired reset token';

/** A non-empty string field, or a 400 naming it. */
function required(value: unknown, field: string): string {
  if (typeof value !== 'string' || value === '')
    throw new InvalidArgumentError(field, `${field} is required`);
  return value;
}

/** The password policy, with the refusal naming `field`. */
function checkPolicy(password: string, field: string): void {
  const reason = checkPasswordPolicy(password);
  if (reason) throw new InvalidArgumentError(field, reason.replace(/^password\b/, field));
}

/**
 * Passwords of an account: forgotten (an e-mailed reset link), reset, changed, and set for the
 * first time. Resetting or changing ends every session and access token of the user.
 */
export class PasswordService {
  constructor(
    private readonly store: AccountStore,
    private readonly users: UserStore,
    private readonly reauth: ReauthService,
    private readonly revocations: RevocationStore,
    private readonly notifier: Pick<Notifier, 'passwordReset'>,
    private readonly logger: Logger,
    private readonly loginThrottle?: Pick<LoginThrottle, 'clear'>,
  ) {}

  /**
   * Starts a reset when a password account has the address. The lookup, the token and the e-mail
   * happen after the answer, so the answer and its timing are the same for every address.
   */
  forgotPassword(rawEmail: unknown): void {
    const email = normalizeEmail(rawEmail);
    void this.startReset(email).catch((err: unknown) =>
      this.logger.error({ err: describeError(err) }, 'password reset could not be started'),
    );
  }

  private async startReset(email: string): Promise<void> {
    const user = await this.users.findByEmail(email);
    // Accounts without a password (social sign-in) have nothing to reset.
    if (!user?.passwordHash) return;
    const since = new Date(Date.now() - 3_600_000);
    if ((await this.store.countEmailTokensSince(user.id, RESET_PURPOSE, since)) >= RESET_EMAILS_PER_HOUR) {
      this.logger.warn({ user_id: user.id }, 'password reset e-mails per hour reached; request ignored');
      return;
    }
    const t = generateSecretToken(EMAIL_TOKEN_PREFIX);
    await this.store.transaction(async (tx) => {
      // Only the newest link works.
      await this.store.voidEmailTokens(user.id, RESET_PURPOSE, tx);
      await this.users.insertEmailToken(
        {
          id: t.id,
          userId: user.id,
          purpose: RESET_PURPOSE,
          secretHash: t.secretHash,
          expiresAt: new Date(Date.now() + RESET_TOKEN_TTL_SECONDS * 1000),
        },
        tx,
      );
      await audit(tx, {
        orgId: user.orgId,
        actorType: 'anonymous',
        actorId: null,
        action: 'password.reset_requested',
        resourceType: 'user',
        resourceId: user.id,
      });
    });
    await this.notifier.passwordReset(user.email, t.token, RESET_TOKEN_TTL_SECONDS);
  }

  /** Consumes a reset token once, sets the new password, and ends every session of the user. */
  async resetPassword(token: unknown, newPassword: unknown): Promise<void> {
    const parsed = typeof token === 'string' ? parseSecretToken(token, EMAIL_TOKEN_PREFIX) : undefined;
    if (!parsed) throw new InvalidArgumentError('token', BAD_RESET_TOKEN);
    const password = required(newPassword, 'new_password');
    // The policy is checked first, so that a weak password does not spend the token.
    checkPolicy(password, 'new_password');
    const hash = await hashPassword(password);
    const userId = await this.store.transaction(async (tx) => {
      const row = await this.users.consumeEmailToken(
        parsed.id,
        RESET_PURPOSE,
        (hash) => secretMatches(parsed.secret, hash),
        tx,
      );
      if (!row) return undefined;
      const user = await this.users.findById(row.userId, tx);
      if (!user) return undefined;
      // The link arrived at the address, which proves it as a verification link would.
      await this.store.setPasswordHash(user.id, hash, true, tx);
      await this.store.voidEmailTokens(user.id, RESET_PURPOSE, tx);
      await this.store.revokeRefreshTokens(user.id, tx);
      const apiKeysRevoked = await this.store.revokePersonalApiKeys(user.id, tx);
      // A reset unlocks an account locked by failed sign-ins.
      await this.loginThrottle?.clear(user.id, tx);
      // The holder of the e-mailed link acts as the user.
      await audit(tx, {
        orgId: user.orgId,
        actorType: 'user',
        actorId: user.id,
        action: 'password.reset',
        resourceType: 'user',
        resourceId: user.id,
        metadata: { method: 'email_link', sessions_revoked: true, api_keys_revoked: apiKeysRevoked },
      });
      return user.id;
    });
    if (!userId) throw new InvalidArgumentError('token', BAD_RESET_TOKEN);
    await waitPastRevocation(await revokeUserEverywhere(this.store, this.revocations, userId));
  }

  /**
   * Changes the caller's password after checking the current one (under the re-auth lockout).
   * Every session and access token of the user ends, the caller's too: the client signs in again
   * with the new password (a sign-in right after the answer works).
   */
  async changePassword(
    p: Principal,
    currentPassword: unknown,
    newPassword: unknown,
    credential: unknown,
  ): Promise<void> {
    const caller = requireUser(p);
    const current = required(currentPassword, 'current_password');
    const next = required(newPassword, 'new_password');
    checkPolicy(next, 'new_password');
    const user = await this.users.findById(caller.userId);
    if (!user) throw new UnauthenticatedError();
    if (!user.passwordHash) {
      throw new InvalidArgumentError(
        'current_password',
        'this account has no password; set one with POST /v1/auth/set-password',
      );
    }
    await this.reauth.confirmStepUp(caller, PASSWORD_CHANGE_PURPOSE, credential);
    if (!(await this.reauth.checkPassword(user, user.passwordHash, current, 'password.change'))) {
      throw new InvalidArgumentError('current_password', 'current_password is not correct');
    }
    if (current.normalize('NFKC') === next.normalize('NFKC')) {
      throw new InvalidArgumentError('new_password', 'new_password must differ from the current password');
    }
    const hash = await hashPassword(next);
    await this.store.transaction(async (tx) => {
      await this.store.setPasswordHash(user.id, hash, false, tx);
      await this.store.revokeRefreshTokens(user.id, tx);
      const apiKeysRevoked = await this.store.revokePersonalApiKeys(user.id, tx);
      await audit(tx, {
        orgId: user.orgId,
        actorType: 'user',
        actorId: user.id,
        action: 'password.changed',
        resourceType: 'user',
        resourceId: user.id,
        metadata: { sessions_revoked: true, api_keys_revoked: apiKeysRevoked },
      });
    });
    await waitPastRevocation(await revokeUserEverywhere(this.store, this.revocations, user.id));
  }

  /**
   * Sets the first password of an account that has none (e.g. one created by a social sign-in),
   * after the step-up `account.password.set`: a `rat_` token (for such an account `POST
   * /v1/auth/reauth` accepts a TOTP code, or a sign-in of the last five minutes) or a TOTP code.
   */
  async setPassword(
    p: Principal,
    rawPassword: unknown,
    rawConfirm: unknown,
    credential: unknown,
  ): Promise<void> {
    const caller = requireUser(p);
    const password = required(rawPassword, 'password');
    if (rawConfirm !== password) {
      throw new InvalidArgumentError('password_confirm', 'password_confirm does not match password');
    }
    const user = await this.users.findById(caller.userId);
    if (!user) throw new UnauthenticatedError();
    const alreadySet = () =>
      new InvalidArgumentError(
        'password',
        'this account already has a password; change it with POST /v1/auth/change-password',
      );
    if (user.passwordHash) throw alreadySet();
    checkPolicy(password, 'password');
    await this.reauth.confirmStepUp(caller, PASSWORD_SET_PURPOSE, credential);
    const hash = await hashPassword(password);
    const set = await this.store.transaction(async (tx) => {
      if (!(await this.store.setFirstPasswordHash(user.id, hash, tx))) return false;
      await audit(tx, {
        orgId: user.orgId,
        actorType: 'user',
        actorId: user.id,
        action: 'password.set',
        resourceType: 'user',
        resourceId: user.id,
      });
      return true;
    });
    if (!set) throw alreadySet();
  }
}
