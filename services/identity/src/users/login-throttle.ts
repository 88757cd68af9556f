import { sql } from 'drizzle-orm';
import { CustosError, type Database } from '@custos/service-kit';
import { audit } from '../audit/identity-audit.js';
import type { User } from './user-types.js';

type Tx = Parameters<Parameters<Database['transaction']>[0]>[0] | Database;

/** Settings of the per-account sign-in protection (LOGIN_LOCKOUT_*, LOGIN_DELAY_*). */
export interface LoginThrottleOptions {
  /** Failed sign-ins of one account within the window that lock it. */
  threshold: number;
  windowSeconds: number;
  /** How long a lockout lasts. */
  lockSeconds: number;
  /** Failures answered at once before the answers to further ones are delayed. */
  freeFailures: number;
  /** Delay of the first delayed failure; each further one doubles it, up to maxDelayMs. */
  baseDelayMs: number;
  maxDelayMs: number;
}

/** What one attempt may do: check the password (its number in the window), or nothing (locked). */
export type Admission = { admitted: true; attempt: number } | { admitted: false; retryAfterSeconds: number };

/**
 * Milliseconds the answer to the `attempt`-th failed sign-in in a window waits: none for the first
 * `freeFailures`, then baseDelayMs doubling with each failure, at most maxDelayMs.
 */
export function failureDelayMs(attempt: number, o: LoginThrottleOptions): number {
  const over = attempt - o.freeFailures;
  if (over <= 0) return 0;
  return Math.min(o.maxDelayMs, o.baseDelayMs * 2 ** Math.min(over - 1, 30));
}

/** The refusal of a sign-in to a locked account: 429 `account_locked` with Retry-After. */
export class AccountLockedError extends CustosError {
  constructor(retryAfterSeconds: number) {
    super('rate_limited', {
      type: 'account_locked',
      title: 'Account locked',
      detail:
        'too many failed sign-ins for this account; it is locked for a while (a password reset unlocks it)',
      extensions: { retry_after: String(Math.max(1, retryAfterSeconds)) },
    });
  }
}

/**
 * Per-account protection of password sign-in, counted in Postgres (so every gateway, every client
 * address and a direct call to identity count together). Each attempt is counted by one atomic
 * upsert *before* its password is checked, so parallel guesses cannot race past the threshold:
 * at most `threshold` passwords are ever checked per window; the attempt that reaches it without
 * success locks the account (one `auth.account_locked` record). A success or a password reset
 * deletes the count.
 */
export class LoginThrottle {
  constructor(
    private readonly db: Database,
    private readonly opts: LoginThrottleOptions,
  ) {}

  /** Counts an attempt at `userId`'s password, or refuses it while the account is locked. */
  async admit(userId: string): Promise<Admission> {
    const { windowSeconds, threshold } = this.opts;
    // A lapsed lockout or window starts a new window; a live lockout is left as it is.
    const r = await this.db.execute(sql`
      INSERT INTO identity.login_failures AS f (user_id, attempts, window_started_at, locked_until)
      VALUES (${userId}, 1, now(), NULL)
      ON CONFLICT (user_id) DO UPDATE SET
        attempts = CASE
          WHEN f.locked_until > now() THEN f.attempts
          WHEN f.locked_until IS NOT NULL OR f.window_started_at <= now() - make_interval(secs => ${windowSeconds}) THEN 1
          ELSE f.attempts + 1 END,
        window_started_at = CASE
          WHEN f.locked_until > now() THEN f.window_started_at
          WHEN f.locked_until IS NOT NULL OR f.window_started_at <= now() - make_interval(secs => ${windowSeconds}) THEN now()
          ELSE f.window_started_at END,
        locked_until = CASE WHEN f.locked_until > now() THEN f.locked_until ELSE NULL END
      RETURNING attempts,
        CEIL(EXTRACT(EPOCH FROM (locked_until - now())))::int AS locked_for`);
    const row = r.rows[0] as { attempts: number; locked_for: number | null };
    if (row.locked_for !== null && row.locked_for > 0)
      return { admitted: false, retryAfterSeconds: row.locked_for };
    // Parallel attempts beyond the threshold: refused unchecked; the failures already lock it.
    if (row.attempts > threshold) return { admitted: false, retryAfterSeconds: this.opts.lockSeconds };
    return { admitted: true, attempt: row.attempts };
  }

  /**
   * The admitted attempt failed. When it was the threshold-th, locks the account and writes the
   * `auth.account_locked` record in the same transaction. Then waits the growing delay.
   */
  async failed(user: User, attempt: number): Promise<void> {
    if (attempt >= this.opts.threshold) await this.lock(user, attempt);
    const ms = failureDelayMs(attempt, this.opts);
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
  }

  /** A successful sign-in (or a reset, in `tx`) clears the account's failures and lockout. */
  async clear(userId: string, tx: Tx = this.db): Promise<void> {
    await tx.execute(sql`DELETE FROM identity.login_failures WHERE user_id = ${userId}`);
  }

  private async lock(user: User, attempts: number): Promise<void> {
    const { lockSeconds, windowSeconds } = this.opts;
    await this.db.transaction(async (tx) => {
      const r = await tx.execute(sql`
        UPDATE identity.login_failures
           SET locked_until = now() + make_interval(secs => ${lockSeconds})
         WHERE user_id = ${user.id} AND (locked_until IS NULL OR locked_until <= now())
         RETURNING locked_until`);
      if (r.rows.length === 0) return;
      await audit(tx, {
        orgId: user.orgId,
        actorType: 'anonymous',
        actorId: null,
        action: 'auth.account_locked',
        resourceType: 'user',
        resourceId: user.id,
        metadata: { failures: attempts, window_seconds: windowSeconds, lock_seconds: lockSeconds },
      });
    });
  }
}
