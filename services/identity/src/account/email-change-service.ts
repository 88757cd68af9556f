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
import {
  SECRET_TOKEN_PREFIXES,
  generateSecretToken,
  parseSecretToken,
  secretMatches,
} from '../credentials/secret-token-fns.js';
import type { Notifier } from '../notifications/notifier.js';
import type { RevocationStore } from '../tokens/revocation-store.js';
import { normalizeEmail } from '../users/user-fns.js';
import type { UserStore } from '../users/user-store.js';
import { EMAIL_CHANGE_PURPOSE, EMAIL_UNDO_TTL_SECONDS, requireUser } from './account-fns.js';
import { revokeUserEverywhere, waitPastRevocation } from './account-sessions.js';
import { UNIQUE_VIOLATION, pgErrorCode, type AccountStore } from './account-store.js';
import type { ReauthService } from './reauth-service.js';

const IN_USE = 'this e-mail address is already in use';
/** `email_tokens.purpose` of the link that undoes an e-mail change. */
const UNDO_PURPOSE = 'email_change_undo';
const BAD_UNDO_TOKEN = 'the undo token is invalid, expired or already used';

/**
 * Changing a user's e-mail address (SPEC.md §3 "Email change"): one pending request per user (a
 * new one replaces it), a 6-digit code to the NEW address that lives 10 minutes and allows five
 * tries. The address is unique across accounts, so of two users racing for it one wins. Starting
 * a change needs a step-up (`account.email.change`); when it completes, the replaced address gets
 * a notice with a single-use link (7 days) that restores it and ends every session and API key.
 */
export class EmailChangeService {
  constructor(
    private readonly store: AccountStore,
    private readonly users: UserStore,
    private readonly notifier: Pick<Notifier, 'emailChangeCode' | 'emailChangedNotice'>,
    private readonly logger: Logger,
    private readonly reauth: Pick<ReauthService, 'confirmStepUp'>,
    private readonly revocations: RevocationStore,
  ) {}

  /** Starts (or restarts) the caller's e-mail change and sends the code to the new address. */
  async request(
    p: Principal,
    rawEmail: unknown,
    credential: unknown,
  ): Promise<{ newEmail: string; expiresInSeconds: number }> {
    const caller = requireUser(p);
    const newEmail = normalizeEmail(rawEmail, 'new_email');
    const user = await this.users.findById(caller.userId);
    if (!user) throw new UnauthenticatedError();
    if (user.email.toLowerCase() === newEmail) {
      throw new InvalidArgumentError('new_email', 'new_email is already the address of this account');
    }
    // After the input checks that spend nothing (a typo does not cost a rat_ token), but before
    // the address is looked up: whether an address has an account is told only to a caller who
    // proved presence, never to a stolen token sending a junk X-Auth-Confirm.
    await this.reauth.confirmStepUp(p, EMAIL_CHANGE_PURPOSE, credential);
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
    const undo = generateSecretToken(SECRET_TOKEN_PREFIXES.email);
    let oldEmail: string | undefined;
    try {
      outcome = await this.store.transaction(async (tx) => {
        oldEmail = await this.store.lockEmailOf(caller.userId, tx);
        if (oldEmail === undefined) return 'gone';
        const newEmail = await this.store.takeEmailChange(caller.userId, pending.codeHash, tx);
        if (newEmail === undefined) return 'gone';
        if (!(await this.store.setEmail(caller.userId, newEmail, tx))) return 'gone';
        await this.store.insertEmailUndoToken(
          {
            id: undo.id,
            userId: caller.userId,
            purpose: UNDO_PURPOSE,
            secretHash: undo.secretHash,
            expiresAt: new Date(Date.now() + EMAIL_UNDO_TTL_SECONDS * 1000),
            restoreEmail: oldEmail,
          },
          tx,
        );
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
    try {
      await this.notifier.emailChangedNotice(oldEmail!, undo.token, EMAIL_UNDO_TTL_SECONDS);
    } catch (err) {
      // The change stands (the new address proved itself); the failure is logged, never the link.
      this.logger.error(
        { err: describeError(err), template: 'email_changed_notice', user_id: caller.userId },
        'e-mail could not be sent',
      );
    }
    return pending.newEmail;
  }

  /**
   * `POST /v1/auth/undo-email-change`: the token mailed to the replaced address restores it (once,
   * within 7 days), and every session, access token and personal API key of the user ends, since
   * whoever changed the address may hold them; the undo links of later changes are voided. 409
   * when another account has the address now.
   */
  async undo(rawToken: unknown): Promise<string> {
    const parsed =
      typeof rawToken === 'string' ? parseSecretToken(rawToken, SECRET_TOKEN_PREFIXES.email) : undefined;
    if (!parsed) throw new InvalidArgumentError('token', BAD_UNDO_TOKEN);
    let done: { userId: string; email: string } | undefined;
    try {
      done = await this.store.transaction(async (tx) => {
        const row = await this.store.consumeEmailUndoToken(
          parsed.id,
          UNDO_PURPOSE,
          (hash) => secretMatches(parsed.secret, hash),
          tx,
        );
        if (!row) return undefined;
        // The undo links of the changes made after this one die with them: whoever made those
        // changes (A→B, then B→C, whose link went to B) cannot take the account back with the
        // later link once the owner undid the first. Earlier links stay: an undo by a later link
        // never locks out the holder of the original address. Voided before the user row is
        // locked (by setEmail): two undos then lock link rows, then the user row, in that order,
        // and cannot deadlock (an older undo waits for a newer one's link row, never the reverse).
        const laterLinksVoided = await this.store.voidEmailTokensSince(
          row.userId,
          UNDO_PURPOSE,
          row.createdAt,
          tx,
        );
        const user = await this.users.findById(row.userId, tx);
        if (!user) return undefined;
        if (!(await this.store.setEmail(user.id, row.restoreEmail, tx))) return undefined;
        // A change started meanwhile by whoever holds the account must not complete.
        await this.store.deleteEmailChange(user.id, tx);
        await this.store.revokeRefreshTokens(user.id, tx);
        const apiKeysRevoked = await this.store.revokePersonalApiKeys(user.id, tx);
        // The holder of the mailed link acts as the user; the addresses stay out of the log.
        await audit(tx, {
          orgId: user.orgId,
          actorType: 'user',
          actorId: user.id,
          action: 'email.change_undone',
          resourceType: 'user',
          resourceId: user.id,
          metadata: {
            method: 'email_link',
            sessions_revoked: true,
            api_keys_revoked: apiKeysRevoked,
            later_undo_links_voided: laterLinksVoided,
          },
        });
        return { userId: user.id, email: row.restoreEmail };
      });
    } catch (err) {
      if (pgErrorCode(err) !== UNIQUE_VIOLATION) throw err;
      throw new ConflictError(
        'the old address belongs to another account now; the undo token is still valid',
        'token',
      );
    }
    if (!done) throw new InvalidArgumentError('token', BAD_UNDO_TOKEN);
    await waitPastRevocation(await revokeUserEverywhere(this.store, this.revocations, done.userId));
    return done.email;
  }
}
