import type { Principal } from '@custos/auth';
import {
  CustosError,
  InvalidArgumentError,
  PermissionDeniedError,
  UnauthenticatedError,
  type Logger,
} from '@custos/service-kit';
import { audit, auditRefusal } from '../audit/identity-audit.js';
import { verifyPassword } from '../credentials/password-fns.js';
import {
  SECRET_TOKEN_PREFIXES,
  generateSecretToken,
  hashSecret,
  parseSecretToken,
} from '../credentials/secret-token-fns.js';
import type { UserStore } from '../users/user-store.js';
import {
  REAUTH_FAILURE_WINDOW_MS,
  REAUTH_MAX_FAILURES,
  REAUTH_TTL_SECONDS,
  STEP_UP_REQUIRED,
  normalizePurpose,
  reauthLockRemainingMs,
  requireUser,
} from './account-fns.js';
import type { AccountStore } from './account-store.js';

const RAT = SECRET_TOKEN_PREFIXES.reauth;

/** A 403 `step_up_required` naming the purpose the action needs. */
export function stepUpRequired(purpose: string, detail: string): PermissionDeniedError {
  return new PermissionDeniedError(detail, { type: STEP_UP_REQUIRED, extensions: { purpose } });
}

/** What a re-auth answers: the token is shown only here. */
export interface ReauthToken {
  token: string;
  purpose: string;
  expiresIn: number;
}

/**
 * Re-authentication of a signed-in user (DECISIONS.md): the password again, for a single-use
 * `rat_` token bound to a purpose and the user (300 s), and the step-up check that consumes such a
 * token or checks the password. Every password check goes through `checkPassword`, which locks
 * re-auth for 15 minutes once ten of them failed within an hour.
 */
export class ReauthService {
  constructor(
    private readonly store: AccountStore,
    private readonly users: UserStore,
    private readonly logger: Logger,
  ) {}

  /** `POST /v1/auth/reauth`: the caller's password for a `rat_` token of `purpose`. */
  async reauthenticate(
    p: Principal,
    input: { purpose: unknown; password: unknown; totpCode: unknown; passkeyAssertionPresent: boolean },
  ): Promise<ReauthToken> {
    const caller = requireUser(p);
    const purpose = normalizePurpose(input.purpose);
    if (typeof input.password !== 'string' || input.password === '') {
      // MFA enrolment is another slice; until its secrets can be read here, only the password proves.
      if (typeof input.totpCode === 'string' && input.totpCode !== '')
        throw new InvalidArgumentError(
          'totp_code',
          're-authentication with a TOTP code is not supported yet; send password',
        );
      if (input.passkeyAssertionPresent)
        throw new InvalidArgumentError(
          'passkey_assertion',
          're-authentication with a passkey is not supported yet; send password',
        );
      throw new InvalidArgumentError('password', 'password is required');
    }
    const user = await this.users.findById(caller.userId);
    if (!user) throw new UnauthenticatedError();
    if (!user.passwordHash) {
      throw new InvalidArgumentError(
        'password',
        'this account has no password; set one with POST /v1/auth/set-password',
      );
    }
    if (!(await this.checkPassword(user, user.passwordHash, input.password, purpose))) {
      throw new PermissionDeniedError('the password is not correct', { field: 'password' });
    }
    const t = generateSecretToken(RAT);
    await this.store.transaction(async (tx) => {
      await this.store.insertReauthToken(
        {
          id: t.id,
          userId: user.id,
          purpose,
          secretHash: t.secretHash,
          expiresAt: new Date(Date.now() + REAUTH_TTL_SECONDS * 1000),
        },
        tx,
      );
      await audit(tx, {
        orgId: user.orgId,
        actorType: 'user',
        actorId: user.id,
        action: 'reauth.issued',
        resourceType: 'user',
        resourceId: user.id,
        metadata: { purpose, method: 'password' },
      });
    });
    return { token: t.token, purpose, expiresIn: REAUTH_TTL_SECONDS };
  }

  /**
   * Confirms a step-up for `purpose` from an `X-Auth-Confirm` value: a `rat_` token of this user
   * and purpose (consumed, once) or the password. Anything else is a 403 `step_up_required`.
   */
  async confirmStepUp(p: Principal, rawPurpose: unknown, credential: unknown): Promise<void> {
    const caller = requireUser(p);
    const purpose = normalizePurpose(rawPurpose);
    if (typeof credential !== 'string' || credential === '') {
      throw stepUpRequired(
        purpose,
        `this action needs re-authentication: send X-Auth-Confirm with a rat_ token for purpose ${purpose} or your password`,
      );
    }
    const token = parseSecretToken(credential, RAT);
    if (token) {
      const ok = await this.store.consumeReauthToken({
        id: token.id,
        userId: caller.userId,
        purpose,
        secretHash: hashSecret(token.secret),
      });
      if (!ok) {
        throw stepUpRequired(
          purpose,
          `the re-auth token is invalid, expired, already used, or not for purpose ${purpose}`,
        );
      }
      return;
    }
    const user = await this.users.findById(caller.userId);
    if (!user) throw new UnauthenticatedError();
    if (!user.passwordHash) throw stepUpRequired(purpose, 'this account has no password to confirm with');
    if (!(await this.checkPassword(user, user.passwordHash, credential, purpose))) {
      throw stepUpRequired(purpose, 'the password is not correct');
    }
  }

  /**
   * Checks a password of a signed-in user under the re-auth lockout: true when it matches, false
   * when not (the failure is recorded), a 429 while re-auth is locked (nothing is checked then).
   * The checks of one user run one at a time, so parallel guesses cannot pass the limit.
   */
  async checkPassword(
    user: { id: string; orgId: string },
    passwordHash: string,
    password: string,
    purpose: string,
  ): Promise<boolean> {
    const userId = user.id;
    const outcome = await this.store.transaction(async (tx) => {
      await this.store.lockReauth(userId, tx);
      const now = Date.now();
      const windowStart = new Date(now - REAUTH_FAILURE_WINDOW_MS);
      const failures = await this.store.failuresSince(userId, windowStart, tx);
      const lockedMs = reauthLockRemainingMs(failures, now);
      if (lockedMs > 0) return { ok: false, lockedMs, failures: failures.length };
      if (await verifyPassword(passwordHash, password)) return { ok: true, lockedMs: 0, failures: 0 };
      await this.store.recordFailure(userId, windowStart, tx);
      return { ok: false, lockedMs: 0, failures: failures.length + 1 };
    });
    if (outcome.lockedMs > 0) {
      const seconds = Math.ceil(outcome.lockedMs / 1000);
      throw new CustosError('rate_limited', {
        detail: `re-authentication is locked after too many wrong passwords; try again in ${Math.ceil(seconds / 60)} minutes`,
        extensions: { retry_after: String(seconds) },
      });
    }
    if (outcome.failures === REAUTH_MAX_FAILURES) {
      this.logger.warn({ user_id: userId }, 're-authentication locked after repeated wrong passwords');
    }
    if (!outcome.ok) {
      await auditRefusal(this.store, {
        orgId: user.orgId,
        actorType: 'user',
        actorId: userId,
        action: 'auth.reauth_failed',
        resourceType: 'user',
        resourceId: userId,
        metadata: { purpose, locked: outcome.failures >= REAUTH_MAX_FAILURES },
      });
    }
    return outcome.ok;
  }
}
