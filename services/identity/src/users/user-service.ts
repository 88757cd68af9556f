import { randomUUID } from 'node:crypto';
import type { Principal } from '@custos/auth';
import {
  ConflictError,
  InvalidArgumentError,
  PermissionDeniedError,
  UnauthenticatedError,
  type Logger,
  describeError,
  isUuid,
} from '@custos/service-kit';
import {
  burnPasswordCheck,
  checkPasswordPolicy,
  hashPassword,
  verifyPassword,
} from '../credentials/password-fns.js';
import {
  SECRET_TOKEN_PREFIXES,
  generateSecretToken,
  parseSecretToken,
  secretMatches,
} from '../credentials/secret-token-fns.js';
import { actorOf, audit, auditRefusal } from '../audit/identity-audit.js';
import type { Mailer } from '../mail/mailer.js';
import type { LoginResult, MfaChallengeStarter } from '../mfa/mfa-types.js';
import { verificationEmail } from '../mail/templates.js';
import type { Revocation, RevocationStore } from '../tokens/revocation-store.js';
import type { TokenIssuer } from '../tokens/token-issuer.js';
import { defaultOrgName, normalizeDisplayName, normalizeEmail } from './user-fns.js';
import type { UserStore } from './user-store.js';
import type { TokenSetView, User } from './user-types.js';

const REFRESH_PREFIX = SECRET_TOKEN_PREFIXES.refresh;
const EMAIL_TOKEN_PREFIX = SECRET_TOKEN_PREFIXES.email;

/** Settings of the human sign-in rules. */
export interface UserServiceOptions {
  refreshTtlSeconds: number;
  verificationTtlSeconds: number;
  requireEmailVerification: boolean;
  publicBaseUrl: string;
}

const LOGIN_FAILED = 'invalid email or password';

/** Signup, e-mail verification, password login, refresh rotation, sign-out and the profile. */
export class UserService {
  constructor(
    private readonly store: UserStore,
    private readonly issuer: TokenIssuer,
    private readonly revocations: RevocationStore,
    private readonly mailer: Mailer,
    private readonly opts: UserServiceOptions,
    private readonly logger: Logger,
    private readonly mfaChallenges: MfaChallengeStarter,
  ) {}

  /** Creates a user who owns a new org; either sends a verification e-mail or signs the user in. */
  async signup(input: { email: unknown; password: unknown; displayName?: unknown }): Promise<{
    email: string;
    verificationRequired: boolean;
    tokens?: TokenSetView;
  }> {
    const email = normalizeEmail(input.email);
    if (typeof input.password !== 'string' || input.password === '') {
      throw new InvalidArgumentError('password', 'password is required');
    }
    const policy = checkPasswordPolicy(input.password);
    if (policy) throw new InvalidArgumentError('password', policy);
    const displayName = normalizeDisplayName(input.displayName);
    const passwordHash = await hashPassword(input.password);
    const verify = this.opts.requireEmailVerification;
    const created = await this.store.transaction(async (tx) => {
      const user = await this.store.createUserWithOrg(
        {
          email,
          displayName,
          passwordHash,
          orgName: defaultOrgName(email, displayName),
          emailVerified: !verify,
        },
        tx,
      );
      if (!user) throw new ConflictError('email is already in use', 'email');
      await audit(tx, {
        orgId: user.orgId,
        actorType: 'user',
        actorId: user.id,
        action: 'user.created',
        resourceType: 'user',
        resourceId: user.id,
        metadata: { method: 'signup', role: user.role },
      });
      if (!verify) return { user, token: undefined };
      const t = generateSecretToken(EMAIL_TOKEN_PREFIX);
      await this.store.insertEmailToken(
        {
          id: t.id,
          userId: user.id,
          purpose: 'verify_email',
          secretHash: t.secretHash,
          expiresAt: new Date(Date.now() + this.opts.verificationTtlSeconds * 1000),
        },
        tx,
      );
      return { user, token: t.token };
    });
    if (!created.token)
      return {
        email,
        verificationRequired: false,
        tokens: await this.startSession(created.user, ['pwd'], 'signup'),
      };
    await this.sendSafely(email, 'verify_email', () =>
      verificationEmail({
        link: `${this.opts.publicBaseUrl}/verify-email?token=${encodeURIComponent(created.token!)}`,
        token: created.token!,
        expiresInSeconds: this.opts.verificationTtlSeconds,
      }),
    );
    return { email, verificationRequired: true };
  }

  /** Consumes a verification token (once) and signs the user in. */
  async verifyEmail(token: unknown): Promise<TokenSetView> {
    const parsed = typeof token === 'string' ? parseSecretToken(token, EMAIL_TOKEN_PREFIX) : undefined;
    if (!parsed) throw new InvalidArgumentError('token', 'invalid or expired verification token');
    const user = await this.store.transaction(async (tx) => {
      const row = await this.store.consumeEmailToken(parsed.id, 'verify_email', tx);
      if (!row || !secretMatches(parsed.secret, row.secretHash)) return undefined;
      await this.store.markEmailVerified(row.userId, tx);
      const verified = await this.store.findById(row.userId, tx);
      if (verified) {
        await audit(tx, {
          orgId: verified.orgId,
          actorType: 'user',
          actorId: verified.id,
          action: 'email.verified',
          resourceType: 'user',
          resourceId: verified.id,
          metadata: { method: 'email_link' },
        });
      }
      return verified;
    });
    if (!user) throw new InvalidArgumentError('token', 'invalid or expired verification token');
    return this.startSession(user, ['email'], 'email_verification');
  }

  /**
   * Password sign-in; every failure answers the same, whether or not the e-mail exists. A user
   * with TOTP gets an MFA challenge instead of tokens (completed by completeMfaLogin).
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
    if (!(await verifyPassword(user.passwordHash, input.password))) {
      this.auditLoginFailed(user, 'wrong_password');
      throw new UnauthenticatedError(LOGIN_FAILED);
    }
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
      // A session signed out (or caught reusing) while this refresh waited stays ended.
      if (await this.revocations.isSessionRevoked(row.familyId, tx)) return { kind: 'invalid' as const };
      await this.store.markRefreshTokenUsed(row.id, tx);
      const user = await this.store.findById(row.userId, tx);
      if (!user) return { kind: 'invalid' as const };
      const next = await this.storeRefreshToken(user.id, { id: row.familyId, amr: row.amr }, tx);
      return { kind: 'ok' as const, user, session: { id: row.familyId, amr: row.amr }, next };
    });
    if (outcome.kind === 'reuse') {
      await this.revocations.publish([outcome.revocation]);
      this.logger.warn({ family_id: outcome.revocation.value }, 'refresh token reuse: session revoked');
    }
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
      await audit(tx, {
        orgId: principal.orgId,
        ...actorOf(principal),
        action: 'auth.logout',
        resourceType: family ? 'session' : 'access_token',
        resourceId: family ?? principal.tokenId,
        metadata: { ended: family ? 'session' : 'access_token' },
      });
    });
    await this.revocations.publish(list);
  }

  /** The caller's profile. */
  async profile(principal: Principal): Promise<User> {
    if (principal.kind !== 'user') throw new PermissionDeniedError('this endpoint is for users');
    const user = await this.store.findById(principal.userId);
    if (!user) throw new UnauthenticatedError();
    return user;
  }

  /** Changes the caller's display name and marketing preference. */
  async updateProfile(
    principal: Principal,
    fields: { displayName?: unknown; marketingEmails?: unknown },
  ): Promise<User> {
    const user = await this.profile(principal);
    const change: { displayName?: string; marketingEmails?: boolean } = {};
    if (fields.displayName !== undefined) change.displayName = normalizeDisplayName(fields.displayName);
    if (fields.marketingEmails !== undefined) {
      if (typeof fields.marketingEmails !== 'boolean') {
        throw new InvalidArgumentError('marketing_emails', 'marketing_emails must be a boolean');
      }
      change.marketingEmails = fields.marketingEmails;
    }
    if (Object.keys(change).length > 0) await this.store.updateProfile(user.id, change);
    return (await this.store.findById(user.id))!;
  }

  /** A new session (refresh-token family) and its `auth.login` record, in one transaction. */
  private async startSession(user: User, amr: string[], method: string): Promise<TokenSetView> {
    const session = { id: randomUUID(), amr };
    const refresh = await this.store.transaction(async (tx) => {
      const token = await this.storeRefreshToken(user.id, session, tx);
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

  private async storeRefreshToken(
    userId: string,
    session: { id: string; amr: string[] },
    tx?: Parameters<UserStore['insertRefreshToken']>[1],
  ): Promise<string> {
    const refresh = generateSecretToken(REFRESH_PREFIX);
    await this.store.insertRefreshToken(
      {
        id: refresh.id,
        familyId: session.id,
        userId,
        secretHash: refresh.secretHash,
        amr: session.amr,
        expiresAt: new Date(Date.now() + this.opts.refreshTtlSeconds * 1000),
      },
      tx,
    );
    return refresh.token;
  }

  private accessFor(user: User, session: { id: string; amr: string[] }, refreshToken: string): TokenSetView {
    const access = this.issuer.userAccessToken(
      { ...user, platformAdmin: this.issuer.isPlatformAdmin(user.email) },
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

  private async sendSafely(
    to: string,
    template: string,
    build: () => { subject: string; text: string },
  ): Promise<void> {
    try {
      await this.mailer.send({ to, ...build() });
    } catch (err) {
      // The account exists either way; the user can ask again. Never log the message itself.
      this.logger.error({ err: describeError(err), template }, 'e-mail could not be sent');
    }
  }
}
