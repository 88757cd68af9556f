import { randomUUID } from 'node:crypto';
import type { Principal } from '@custos/auth';
import { auditOf } from '@custos/events';
import { PermissionDeniedError, UnauthenticatedError, type Logger, isUuid } from '@custos/service-kit';
import { burnPasswordCheck, verifyPassword } from '../credentials/password-fns.js';
import {
  SECRET_TOKEN_PREFIXES,
  generateSecretToken,
  parseSecretToken,
  secretMatches,
} from '../credentials/secret-token-fns.js';
import { audit, auditRefusal } from '../audit/identity-audit.js';
import type { LoginResult, MfaChallengeStarter } from '../mfa/mfa-types.js';
import type { Revocation, RevocationStore } from '../tokens/revocation-store.js';
import type { TokenIssuer } from '../tokens/token-issuer.js';
import { AccountLockedError, type LoginThrottle } from './login-throttle.js';
import { upgradePasswordHash } from './password-upgrade.js';
import type { UserStore } from './user-store.js';
import type { TokenSetView, User } from './user-types.js';

const REFRESH_PREFIX = SECRET_TOKEN_PREFIXES.refresh;
const LOGIN_FAILED = 'invalid email or password';

/** Settings of sessions. */
export interface SessionServiceOptions {
  refreshTtlSeconds: number;
  /** Absolute lifetime of a refresh-token family from its sign-in (REFRESH_TOKEN_FAMILY_TTL_SECONDS). */
  familyTtlSeconds: number;
}

/**
 * Sessions of people: password sign-in (or its MFA challenge), sessions started by other proofs
 * (e-mail verification, MFA, Google), refresh-token rotation with reuse detection, and sign-out.
 */
export class SessionService {
  constructor(
    private readonly store: UserStore,
    private readonly issuer: Pick<TokenIssuer, 'userAccessToken' | 'isPlatformAdmin'>,
    private readonly revocations: Pick<RevocationStore, 'isSessionRevoked' | 'record' | 'publish'>,
    private readonly mfaChallenges: MfaChallengeStarter,
    private readonly opts: SessionServiceOptions,
    private readonly logger: Logger,
    private readonly throttle?: Pick<LoginThrottle, 'admit' | 'failed' | 'clear'>,
  ) {}

  /**
   * Password sign-in; every failure answers the same, whether or not the e-mail exists, except
   * that an account locked by failed sign-ins (LoginThrottle) answers 429 `account_locked` even to
   * its right password. A user with TOTP gets an MFA challenge instead of tokens (completed by
   * completeMfaLogin); the right password already clears the failure count.
   */
  async login(input: { email: unknown; password: unknown }): Promise<LoginResult> {
    if (
      typeof input.email !== 'string' ||
      typeof input.password !== 'string' ||
      !input.email ||
      !input.password
    ) {
      await burnPasswordCheck();
      throw new UnauthenticatedError(LOGIN_FAILED);
    }
    const user = await this.store.findByEmail(input.email.trim());
    if (!user?.passwordHash) {
      await burnPasswordCheck();
      if (user) this.auditLoginFailed(user, 'no_password');
      throw new UnauthenticatedError(LOGIN_FAILED);
    }
    // Per account, whatever the client's address: counted before the password is checked.
    const admission = await this.throttle?.admit(user.id);
    if (admission && !admission.admitted) {
      await burnPasswordCheck();
      this.auditLoginFailed(user, 'locked');
      throw new AccountLockedError(admission.retryAfterSeconds);
    }
    if (!(await verifyPassword(user.passwordHash, input.password))) {
      this.auditLoginFailed(user, 'wrong_password');
      if (admission) await this.throttle?.failed(user, admission.attempt);
      throw new UnauthenticatedError(LOGIN_FAILED);
    }
    if (admission) await this.throttle?.clear(user.id);
    await upgradePasswordHash(this.store, this.logger, user.id, user.passwordHash, input.password);
    // Only someone who knows the password learns that the address is unverified.
    if (!user.emailVerified) {
      throw new PermissionDeniedError('verify your e-mail address before signing in', {
        type: 'email_not_verified',
      });
    }
    if (user.totpEnabled) return { kind: 'mfa', challenge: await this.mfaChallenges.start(user.id) };
    return { kind: 'tokens', tokens: await this.startSession(user, ['pwd'], 'password') };
  }

  /**
   * Records a failed password sign-in of a known account, under its org (an unknown address has no
   * org to record it under). Not awaited: the 401 and its timing stay the same for every address.
   */
  private auditLoginFailed(user: User, reason: string): void {
    void auditRefusal(this.store, {
      orgId: user.orgId,
      actorType: 'anonymous',
      actorId: null,
      action: 'auth.login_failed',
      resourceType: 'user',
      resourceId: user.id,
      metadata: { method: 'password', reason },
    });
  }

  /** Starts the session of a password sign-in whose second factor was just verified. */
  async completeMfaLogin(userId: string, amr: string[]): Promise<TokenSetView> {
    const user = await this.store.findById(userId);
    if (!user) throw new UnauthenticatedError(LOGIN_FAILED);
    return this.startSession(user, amr, 'mfa');
  }

  /**
   * Signs in a user whose identity another party just proved (Google sign-in): a user with TOTP
   * gets the MFA challenge exactly as a password sign-in does, anyone else a new session.
   */
  async signInVerifiedUser(userId: string, amr: string[]): Promise<LoginResult> {
    const user = await this.store.findById(userId);
    if (!user) throw new UnauthenticatedError(LOGIN_FAILED);
    if (user.totpEnabled) return { kind: 'mfa', challenge: await this.mfaChallenges.start(user.id) };
    return { kind: 'tokens', tokens: await this.startSession(user, amr, amr[0] ?? 'federated') };
  }

  /**
   * Rotates a refresh token. A token that was already used (a replay, or a stolen copy used after
   * the owner) revokes its whole family, and the access tokens of that session with it. The row is
   * locked for the decision, so of parallel presentations one rotates and the others count as reuse.
   */
  async refresh(refreshToken: unknown): Promise<TokenSetView> {
    const parsed =
      typeof refreshToken === 'string' ? parseSecretToken(refreshToken, REFRESH_PREFIX) : undefined;
    if (!parsed) throw new UnauthenticatedError('invalid refresh token');
    const outcome = await this.store.transaction(async (tx) => {
      const row = await this.store.lockRefreshToken(parsed.id, tx);
      if (!row || !secretMatches(parsed.secret, row.secretHash)) return { kind: 'invalid' as const };
      // Already revoked (sign-out, password change): simply invalid. Used but not revoked: reuse.
      if (row.revokedAt) return { kind: 'invalid' as const };
      if (row.usedAt) return { kind: 'reuse' as const, revocation: await this.endReusedFamily(row, tx) };
      if (row.expiresAt.getTime() <= Date.now()) return { kind: 'invalid' as const };
      // The family's absolute lifetime counts from its sign-in, however often it rotated since.
      const startedAt = await this.store.familyStartedAt(row.familyId, tx);
      if (!startedAt || familyEndsAt(startedAt, this.opts.familyTtlSeconds) <= Date.now()) {
        return { kind: 'ended' as const };
      }
      // A session signed out (or caught reusing) while this refresh waited stays ended.
      if (await this.revocations.isSessionRevoked(row.familyId, tx)) return { kind: 'invalid' as const };
      await this.store.markRefreshTokenUsed(row.id, tx);
      const user = await this.store.findById(row.userId, tx);
      if (!user) return { kind: 'invalid' as const };
      const next = await this.storeRefreshToken(user.id, { id: row.familyId, amr: row.amr }, startedAt, tx);
      return { kind: 'ok' as const, user, session: { id: row.familyId, amr: row.amr }, next };
    });
    if (outcome.kind === 'reuse') {
      await this.revocations.publish([outcome.revocation]);
      this.logger.warn({ family_id: outcome.revocation.value }, 'refresh token reuse: session revoked');
    }
    if (outcome.kind === 'ended') throw new UnauthenticatedError('session expired: sign in again');
    if (outcome.kind !== 'ok') throw new UnauthenticatedError('invalid refresh token');
    return this.accessFor(outcome.user, outcome.session, outcome.next);
  }

  /**
   * Signs the caller out: this access token stops working at once, and for a password session the
   * whole session (its refresh tokens and the access tokens minted from them) with it.
   */
  async signOut(principal: Principal): Promise<void> {
    const list: Revocation[] = [
      { kind: 'jti', value: principal.tokenId, expiresAt: new Date(principal.expiresAt * 1000) },
    ];
    const sid = principal.sessionId;
    // Only sessions are refresh-token families (UUIDs); a key's tokens are revoked with the key.
    const family =
      principal.kind === 'user' && sid && isUuid(sid) && !principal.amr.includes('api_key') ? sid : undefined;
    if (family) list.push(this.sessionRevocation(family));
    await this.store.transaction(async (tx) => {
      await this.revocations.record(list, tx);
      if (family) await this.store.revokeFamily(family, tx);
      await audit(
        tx,
        auditOf(
          principal,
          'auth.logout',
          { type: family ? 'session' : 'access_token', id: family ?? principal.tokenId },
          { ended: family ? 'session' : 'access_token' },
        ),
      );
    });
    await this.revocations.publish(list);
  }

  /** A new session (refresh-token family) and its `auth.login` record, in one transaction. */
  async startSession(user: User, amr: string[], method: string): Promise<TokenSetView> {
    const session = { id: randomUUID(), amr };
    const refresh = await this.store.transaction(async (tx) => {
      const token = await this.storeRefreshToken(user.id, session, new Date(), tx, true);
      await audit(tx, {
        orgId: user.orgId,
        actorType: 'user',
        actorId: user.id,
        action: 'auth.login',
        resourceType: 'user',
        resourceId: user.id,
        metadata: { method, amr, session_id: session.id },
      });
      return token;
    });
    return this.accessFor(user, session, refresh);
  }

  /** Stores the next refresh token of a family; it expires at the latest when the family does. */
  private async storeRefreshToken(
    userId: string,
    session: { id: string; amr: string[] },
    familyStartedAt: Date,
    tx?: Parameters<UserStore['insertRefreshToken']>[1],
    first = false,
  ): Promise<string> {
    const refresh = generateSecretToken(REFRESH_PREFIX);
    await this.store.insertRefreshToken(
      {
        id: refresh.id,
        familyId: session.id,
        userId,
        secretHash: refresh.secretHash,
        amr: session.amr,
        // The first token's created_at is the family's start (familyStartedAt reads it back): the
        // same instant as the cap below, not the database's clock a moment apart.
        ...(first ? { createdAt: familyStartedAt } : {}),
        expiresAt: new Date(
          Math.min(
            Date.now() + this.opts.refreshTtlSeconds * 1000,
            familyEndsAt(familyStartedAt, this.opts.familyTtlSeconds),
          ),
        ),
      },
      tx,
    );
    return refresh.token;
  }

  private accessFor(user: User, session: { id: string; amr: string[] }, refreshToken: string): TokenSetView {
    const access = this.issuer.userAccessToken(
      { ...user, platformAdmin: this.issuer.isPlatformAdmin(user) },
      session,
    );
    return { accessToken: access.token, tokenType: 'Bearer', expiresIn: access.expiresIn, refreshToken };
  }

  /**
   * The revocation of a session. Kept as long as the family's refresh tokens could live, so a
   * refresh racing the revocation (and every access token it minted) is refused too.
   */
  private sessionRevocation(familyId: string): Revocation {
    return {
      kind: 'sid',
      value: familyId,
      expiresAt: new Date(Date.now() + this.opts.refreshTtlSeconds * 1000),
    };
  }

  /**
   * A used refresh token was presented again: revokes its family in `tx` and records
   * `auth.refresh_reuse` there; the caller publishes the returned revocation after the commit.
   */
  private async endReusedFamily(
    row: { familyId: string; userId: string },
    tx: Parameters<Parameters<UserStore['transaction']>[0]>[0],
  ): Promise<Revocation> {
    const revocation = this.sessionRevocation(row.familyId);
    await this.store.revokeFamily(row.familyId, tx);
    await this.revocations.record([revocation], tx);
    const owner = await this.store.findById(row.userId, tx);
    if (owner) {
      // Whoever presented it is unknown: the owner replaying, or a thief after the owner.
      await audit(tx, {
        orgId: owner.orgId,
        actorType: 'anonymous',
        actorId: null,
        action: 'auth.refresh_reuse',
        resourceType: 'session',
        resourceId: row.familyId,
        metadata: { user_id: owner.id },
      });
    }
    return revocation;
  }
}

/** When a refresh-token family started at `startedAt` ends, in epoch milliseconds. */
export function familyEndsAt(startedAt: Date, familyTtlSeconds: number): number {
  return startedAt.getTime() + familyTtlSeconds * 1000;
}
