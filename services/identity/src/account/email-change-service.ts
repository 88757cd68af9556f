import { type Principal, actorOf } from '@custos/auth';
import {
  ConflictError,
  InvalidArgumentError,
  UnauthenticatedError,
  type Logger,
  describeError,
} from '@custos/service-kit';
import {
  EMAIL_CODE_MAX_ATTEMPTS,
  EMAIL_CODE_TTL_SECONDS,
  emailCodeMatches,
  generateEmailCode,
  hashEmailCode,
} from '../credentials/email-code-fns.js';
import { audit } from '../audit/identity-audit.js';
import type { Notifier } from '../notifications/notifier.js';
import { normalizeEmail } from '../users/user-fns.js';
import type { UserStore } from '../users/user-store.js';
import { requireUser } from './account-fns.js';
import { UNIQUE_VIOLATION, pgErrorCode, type AccountStore } from './account-store.js';

const IN_USE = 'this e-mail address is already in use';

/**
 * Changing a user's e-mail address (SPEC.md §3 "Email change"): one pending request per user (a
 * new one replaces it), a 6-digit code to the NEW address that lives 10 minutes and allows five
 * tries. The address is unique across accounts, so of two users racing for it one wins.
 */
export class EmailChangeService {
  constructor(
    private readonly store: AccountStore,
    private readonly users: UserStore,
    private readonly notifier: Pick<Notifier, 'emailChangeCode'>,
    private readonly logger: Logger,
  ) {}

  /** Starts (or restarts) the caller's e-mail change and sends the code to the new address. */
  async request(p: Principal, rawEmail: unknown): Promise<{ newEmail: string; expiresInSeconds: number }> {
    const caller = requireUser(p);
    const newEmail = normalizeEmail(rawEmail, 'new_email');
    const user = await this.users.findById(caller.userId);
    if (!user) throw new UnauthenticatedError();
    if (user.email.toLowerCase() === newEmail) {
      throw new InvalidArgumentError('new_email', 'new_email is already the address of this account');
    }
    if (await this.store.emailTaken(newEmail, user.id)) throw new ConflictError(IN_USE, 'new_email');
    const code = generateEmailCode();
    await this.store.upsertEmailChange({
      userId: user.id,
      newEmail,
      codeHash: hashEmailCode(code),
      expiresAt: new Date(Date.now() + EMAIL_CODE_TTL_SECONDS * 1000),
    });
    try {
      await this.notifier.emailChangeCode(newEmail, code, EMAIL_CODE_TTL_SECONDS);
    } catch (err) {
      // The request stands; asking again sends a new code. Never log the message itself.
      this.logger.error(
        { err: describeError(err), template: 'email_change_code' },
        'e-mail could not be sent',
      );
    }
    return { newEmail, expiresInSeconds: EMAIL_CODE_TTL_SECONDS };
  }

  /** Completes the caller's pending change with its code; returns the new address. */
  async verify(p: Principal, rawCode: unknown): Promise<string> {
    const caller = requireUser(p);
    if (typeof rawCode !== 'string' || rawCode.trim() === '')
      throw new InvalidArgumentError('code', 'code is required');
    const pending = await this.store.countEmailChangeAttempt(caller.userId, EMAIL_CODE_MAX_ATTEMPTS);
    if (!pending) {
      throw new InvalidArgumentError(
        'code',
        'no e-mail change is pending, or its code expired or was tried too often; request a new one',
      );
    }
    if (!emailCodeMatches(rawCode, pending.codeHash)) {
      const left = EMAIL_CODE_MAX_ATTEMPTS - pending.attempts;
      throw new InvalidArgumentError(
        'code',
        left > 0
          ? `the code is not correct (${left} tries left)`
          : 'the code is not correct; request a new one',
      );
    }
    let outcome: 'changed' | 'gone' | 'taken';
    try {
      outcome = await this.store.transaction(async (tx) => {
        const newEmail = await this.store.takeEmailChange(caller.userId, pending.codeHash, tx);
        if (newEmail === undefined) return 'gone';
        if (!(await this.store.setEmail(caller.userId, newEmail, tx))) return 'gone';
        // The addresses themselves stay out of the append-only log (personal data, not facts).
        await audit(tx, {
          orgId: caller.orgId,
          ...actorOf(caller),
          action: 'email.changed',
          resourceType: 'user',
          resourceId: caller.userId,
          metadata: { method: 'email_code' },
        });
        return 'changed';
      });
    } catch (err) {
      if (pgErrorCode(err) !== UNIQUE_VIOLATION) throw err;
      outcome = 'taken';
    }
    if (outcome === 'taken') {
      // Another account took the address since the request; this change can never complete.
      await this.store.deleteEmailChange(caller.userId);
      throw new ConflictError(IN_USE, 'new_email');
    }
    if (outcome === 'gone') {
      // A parallel verification with the same code won, or a new request replaced this one.
      throw new InvalidArgumentError('code', 'the code is no longer valid; request a new one');
    }
    return pending.newEmail;
  }
}
