import { ConflictError, InvalidArgumentError, type Logger, describeError } from '@custos/service-kit';
import { checkPasswordPolicy, hashPassword } from '../credentials/password-fns.js';
import {
  SECRET_TOKEN_PREFIXES,
  generateSecretToken,
  parseSecretToken,
  secretMatches,
} from '../credentials/secret-token-fns.js';
import { audit } from '../audit/identity-audit.js';
import type { Notifier } from '../notifications/notifier.js';
import type { AccountGate } from './account-gate.js';
import type { SessionService } from './session-service.js';
import { defaultOrgName, normalizeDisplayName, normalizeEmail } from './user-fns.js';
import type { UserStore } from './user-store.js';
import type { TokenSetView } from './user-types.js';

const EMAIL_TOKEN_PREFIX = SECRET_TOKEN_PREFIXES.email;
const BAD_TOKEN = 'invalid or expired verification token';

/** Settings of signup. */
export interface SignupServiceOptions {
  verificationTtlSeconds: number;
  requireEmailVerification: boolean;
}

/** What a signup answers: the address, and tokens unless it waits for the e-mail's verification. */
export interface SignupResult {
  email: string;
  verificationRequired: boolean;
  tokens?: TokenSetView;
}

/**
 * Signup with a password (a user who owns a new org) and the e-mail verification that completes
 * it: a single-use `cse_` token, e-mailed, that signs the user in.
 */
export class SignupService {
  constructor(
    private readonly store: UserStore,
    private readonly sessions: Pick<SessionService, 'startSession'>,
    private readonly notifier: Pick<Notifier, 'verifyEmail'>,
    private readonly opts: SignupServiceOptions,
    private readonly logger: Logger,
    private readonly gate: Pick<AccountGate, 'precheck' | 'admit' | 'settle'>,
  ) {}

  /** Creates a user who owns a new org; either sends a verification e-mail or signs the user in. */
  async signup(input: { email: unknown; password: unknown; displayName?: unknown }): Promise<SignupResult> {
    const email = normalizeEmail(input.email);
    if (typeof input.password !== 'string' || input.password === '') {
      throw new InvalidArgumentError('password', 'password is required');
    }
    const policy = checkPasswordPolicy(input.password);
    if (policy) throw new InvalidArgumentError('password', policy);
    const displayName = normalizeDisplayName(input.displayName);
    // SIGNUP_MODE refuses before the password is hashed; `admit` decides again under the lock.
    await this.gate.precheck('signup');
    const passwordHash = await hashPassword(input.password);
    const verify = this.opts.requireEmailVerification;
    const created = await this.store.transaction(async (tx) => {
      const admitted = await this.gate.admit('signup', tx);
      const row = await this.store.createUserWithOrg(
        {
          email,
          displayName,
          passwordHash,
          orgName: defaultOrgName(email, displayName),
          emailVerified: !verify,
        },
        tx,
      );
      if (!row) throw new ConflictError('email is already in use', 'email');
      const platformAdmin = await this.gate.settle(row.id, admitted, tx);
      const user = { ...row, platformAdmin };
      await audit(tx, {
        orgId: user.orgId,
        actorType: 'user',
        actorId: user.id,
        action: 'user.created',
        resourceType: 'user',
        resourceId: user.id,
        metadata: { method: 'signup', role: user.role, ...(platformAdmin ? { platform_admin: true } : {}) },
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
    if (!created.token) {
      const tokens = await this.sessions.startSession(created.user, ['pwd'], 'signup');
      return { email, verificationRequired: false, tokens };
    }
    try {
      await this.notifier.verifyEmail(email, created.token, this.opts.verificationTtlSeconds);
    } catch (err) {
      // The account exists either way; the user can ask again. Never log the message itself.
      this.logger.error({ err: describeError(err), template: 'verify_email' }, 'e-mail could not be sent');
    }
    return { email, verificationRequired: true };
  }

  /**
   * Consumes a verification token (once) and signs the user in, unless `withoutSession` (the
   * browser page, which would only throw the tokens away and leave a live session behind).
   */
  async verifyEmail(token: unknown, withoutSession = false): Promise<TokenSetView | undefined> {
    const parsed = typeof token === 'string' ? parseSecretToken(token, EMAIL_TOKEN_PREFIX) : undefined;
    if (!parsed) throw new InvalidArgumentError('token', BAD_TOKEN);
    const user = await this.store.transaction(async (tx) => {
      const row = await this.store.consumeEmailToken(
        parsed.id,
        'verify_email',
        (hash) => secretMatches(parsed.secret, hash),
        tx,
      );
      if (!row) return undefined;
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
    if (!user) throw new InvalidArgumentError('token', BAD_TOKEN);
    if (withoutSession) return undefined;
    return this.sessions.startSession(user, ['email'], 'email_verification');
  }
}
