import type { Principal, UserPrincipal } from '@custos/auth';
import {
  CustosError,
  InvalidArgumentError,
  PermissionDeniedError,
  UnauthenticatedError,
  type Logger,
  isUuid,
} from '@custos/service-kit';
import { audit, auditRefusal } from '../audit/identity-audit.js';
import { verifyPassword } from '../credentials/password-fns.js';
import {
  SECRET_TOKEN_PREFIXES,
  generateSecretToken,
  hashSecret,
  parseSecretToken,
} from '../credentials/secret-token-fns.js';
import type { TotpStepUpCodes } from '../mfa/totp-step-up.js';
import { upgradePasswordHash } from '../users/password-upgrade.js';
import type { UserStore } from '../users/user-store.js';
import {
  REAUTH_FAILURE_WINDOW_MS,
  REAUTH_MAX_FAILURES,
  REAUTH_TTL_SECONDS,
  STEP_UP_REQUIRED,
  type StepUpMethod,
  normalizePurpose,
  reauthLockRemainingMs,
  requireUser,
  stepUpMethodOf,
} from './account-fns.js';
import type { AccountStore, Tx } from './account-store.js';

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
 * Re-authentication of a signed-in user (DECISIONS.md): the password or a TOTP code again, for a
 * single-use `rat_` token bound to a purpose and the user (300 s), and the step-up check that
 * consumes such a token or checks the password or a TOTP code. Every password and TOTP check goes
 * through `checkUnderLockout`, which locks re-auth for 15 minutes once ten failed within an hour.
 */
export class ReauthService {
  constructor(
    private readonly store: AccountStore,
    private readonly users: UserStore,
    private readonly logger: Logger,
    private readonly totp: Pick<TotpStepUpCodes, 'hasTotp' | 'spend'>,
  ) {}

  /**
   * `POST /v1/auth/reauth`: the caller's password, or a current TOTP code when TOTP is enrolled,
   * for a `rat_` token of `purpose`.
   */
  async reauthenticate(
    p: Principal,
    input: { purpose: unknown; password: unknown; totpCode: unknown; passkeyAssertionPresent: boolean },
  ): Promise<ReauthToken> {
    const caller = requireUser(p);
    const purpose = normalizePurpose(input.purpose);
    const password = typeof input.password === 'string' ? input.password : '';
    const totpCode = typeof input.totpCode === 'string' ? input.totpCode : '';
    if (input.passkeyAssertionPresent && password === '' && totpCode === '')
      throw new InvalidArgumentError(
        'passkey_assertion',
        're-authentication with a passkey is not supported yet; send password or totp_code',
      );
    const user = await this.users.findById(caller.userId);
    if (!user) throw new UnauthenticatedError();
    let method: StepUpMethod | 'recent_sign_in';
    if (password === '' && totpCode === '') {
      // An account with neither a password nor TOTP (Google sign-in only) has nothing to type: a
      // sign-in of the last REAUTH_TTL_SECONDS proves the person instead (an interactive session,
      // never a token from an API key or a refresh of an old session).
      if (user.passwordHash || (await this.totp.hasTotp(user.id)))
        throw new InvalidArgumentError('password', 'password or totp_code is required');
      if (!(await this.signedInRecently(caller)))
        throw new PermissionDeniedError(
          `this account has no password or TOTP: sign in again (within ${REAUTH_TTL_SECONDS / 60} minutes) and retry`,
          { type: STEP_UP_REQUIRED, extensions: { purpose } },
        );
      method = 'recent_sign_in';
    } else if (password !== '') {
      if (!user.passwordHash) {
        throw new InvalidArgumentError(
          'password',
          'this account has no password; send totp_code, or set a password with POST /v1/auth/set-password',
        );
      }
      const hash = user.passwordHash;
      if (!(await this.checkUnderLockout(user, purpose, 'password', () => verifyPassword(hash, password)))) {
        throw new PermissionDeniedError('the password is not correct', { field: 'password' });
      }
      await upgradePasswordHash(this.users, this.logger, user.id, hash, password);
      method = 'password';
    } else {
      if (!(await this.totp.hasTotp(user.id)))
        throw new InvalidArgumentError('totp_code', 'this account has no TOTP enrolled; send password');
      if (
        !(await this.checkUnderLockout(user, purpose, 'totp', (tx) => this.totp.spend(user.id, totpCode, tx)))
      ) {
        throw new PermissionDeniedError('the TOTP code is not correct or was used already', {
          field: 'totp_code',
        });
      }
      method = 'totp';
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
        metadata: { purpose, method },
      });
    });
    return { token: t.token, purpose, expiresIn: REAUTH_TTL_SECONDS };
  }

  /** Whether the caller's token comes from an interactive session that started within REAUTH_TTL_SECONDS. */
  private async signedInRecently(caller: UserPrincipal): Promise<boolean> {
    if (!caller.sessionId || caller.amr.includes('api_key') || !isUuid(caller.sessionId)) return false;
    const started = await this.store.sessionStartedAt(caller.sessionId, caller.userId);
    return started !== undefined && Date.now() - started.getTime() <= REAUTH_TTL_SECONDS * 1000;
  }

  /**
   * Confirms a step-up for `purpose` from an `X-Auth-Confirm` value of the signed-in caller.
   */
  async confirmStepUp(p: Principal, rawPurpose: unknown, credential: unknown): Promise<void> {
    const caller = requireUser(p);
    const purpose = normalizePurpose(rawPurpose);
    const user = await this.users.findById(caller.userId);
    if (!user) throw new UnauthenticatedError();
    await this.confirmFor(user, purpose, credential);
  }

  /**
   * ConfirmUserStepUp: the same check for a user another service verified the access token of
   * (vault-crypto, signer, approvals); the user must be live and of `orgId`. Answers the kind of
   * credential that was checked, so a caller can ask for a stronger one (approvals' tier 3: TOTP).
   */
  async confirmUserStepUp(
    userId: string,
    orgId: string,
    rawPurpose: unknown,
    credential: unknown,
  ): Promise<StepUpMethod> {
    const purpose = normalizePurpose(rawPurpose);
    const user = isUuid(userId) ? await this.users.findById(userId) : undefined;
    if (!user || user.orgId !== orgId) throw new UnauthenticatedError();
    return this.confirmFor(user, purpose, credential);
  }

  /**
   * The step-up check: a `rat_` token of this user and purpose (consumed, once), a current TOTP
   * code when TOTP is enrolled (spent, once), or the password (under the re-auth lockout). Anything
   * else is a 403 `step_up_required`, audited as `auth.reauth_failed`. Answers the method checked.
   */
  private async confirmFor(
    user: { id: string; orgId: string; passwordHash: string | null },
    purpose: string,
    credential: unknown,
  ): Promise<StepUpMethod> {
    if (typeof credential !== 'string' || credential === '') {
      throw stepUpRequired(
        purpose,
        `this action needs re-authentication: send X-Auth-Confirm with a rat_ token for purpose ${purpose}, your password, or a TOTP code`,
      );
    }
    const token = parseSecretToken(credential, RAT);
    const method = stepUpMethodOf(
      credential,
      token !== undefined,
      !token && (await this.totp.hasTotp(user.id)),
    );
    if (token) {
      const ok = await this.store.consumeReauthToken({
        id: token.id,
        userId: user.id,
        purpose,
        secretHash: hashSecret(token.secret),
      });
      if (!ok) {
        await this.auditStepUpFailure(user, purpose, 'reauth_token', false);
        throw stepUpRequired(
          purpose,
          `the re-auth token is invalid, expired, already used, or not for purpose ${purpose}`,
        );
      }
      return 'reauth_token';
    }
    if (method === 'totp') {
      if (
        !(await this.checkUnderLockout(user, purpose, 'totp', (tx) =>
          this.totp.spend(user.id, credential, tx),
        ))
      )
        throw stepUpRequired(purpose, 'the TOTP code is not correct or was used already');
      return 'totp';
    }
    const hash = user.passwordHash;
    if (!hash) {
      await this.auditStepUpFailure(user, purpose, 'password', false);
      throw stepUpRequired(
        purpose,
        'this account has no password to confirm with; use a rat_ token or a TOTP code',
      );
    }
    if (!(await this.checkUnderLockout(user, purpose, 'password', () => verifyPassword(hash, credential)))) {
      throw stepUpRequired(purpose, 'the password is not correct');
    }
    await upgradePasswordHash(this.users, this.logger, user.id, hash, credential);
    return 'password';
  }

  /** Checks a password of a signed-in user under the re-auth lockout (see checkUnderLockout). */
  checkPassword(
    user: { id: string; orgId: string },
    passwordHash: string,
    password: string,
    purpose: string,
  ): Promise<boolean> {
    return this.checkUnderLockout(user, purpose, 'password', () => verifyPassword(passwordHash, password));
  }

  /**
   * Checks a credential of a signed-in user (a password, a TOTP code) under the re-auth lockout:
   * true when it matches, false when not (the failure is recorded and audited), a 429 while re-auth
   * is locked (nothing is checked then). The checks of one user run one at a time, so parallel
   * guesses cannot pass the limit.
   */
  private async checkUnderLockout(
    user: { id: string; orgId: string },
    purpose: string,
    method: StepUpMethod,
    check: (tx: Tx) => Promise<boolean>,
  ): Promise<boolean> {
    const userId = user.id;
    const outcome = await this.store.transaction(async (tx) => {
      await this.store.lockReauth(userId, tx);
      const now = Date.now();
      const windowStart = new Date(now - REAUTH_FAILURE_WINDOW_MS);
      const failures = await this.store.failuresSince(userId, windowStart, tx);
      const lockedMs = reauthLockRemainingMs(failures, now);
      if (lockedMs > 0) return { ok: false, lockedMs, failures: failures.length };
      // Database reads of the check run in this transaction: holding this connection and the
      // lock while waiting for a second one would let a few parallel checks of one user exhaust
      // the pool.
      if (await check(tx)) return { ok: true, lockedMs: 0, failures: 0 };
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
      await this.auditStepUpFailure(user, purpose, method, outcome.failures >= REAUTH_MAX_FAILURES);
    }
    return outcome.ok;
  }

  /** Records a refused re-authentication or step-up (the caller is refused either way). */
  private auditStepUpFailure(
    user: { id: string; orgId: string },
    purpose: string,
    method: StepUpMethod,
    locked: boolean,
  ): Promise<void> {
    return auditRefusal(this.store, {
      orgId: user.orgId,
      actorType: 'user',
      actorId: user.id,
      action: 'auth.reauth_failed',
      resourceType: 'user',
      resourceId: user.id,
      metadata: { purpose, method, locked },
    });
  }
}
