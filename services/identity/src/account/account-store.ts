import { and, eq, gt, gte, isNull, lt, lte, or, sql } from 'drizzle-orm';
import type { Database } from '@custos/service-kit';
import {
  emailChanges,
  emailTokens,
  featureQuotaUsage,
  personalApiKeys,
  reauthFailures,
  reauthTokens,
  refreshTokens,
  users,
} from '../db/schema.js';

/** A transaction or the database itself. */
export type Tx = Parameters<Parameters<Database['transaction']>[0]>[0] | Database;

/** The security settings stored on a user. */
export interface StoredSettings {
  requirePasskeyForVaults: boolean;
  requirePasskeyForMfa: boolean;
}

/** The Postgres error code of a failed query (drizzle wraps pg's error in `cause`). */
export function pgErrorCode(err: unknown): string | undefined {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, i = 0; e && i < 3; i++) {
    if (typeof e.code === 'string') return e.code;
    e = e.cause as typeof e;
  }
  return undefined;
}

/** Postgres `unique_violation`. */
export const UNIQUE_VIOLATION = '23505';

/**
 * SQL of the account slice: passwords, reset tokens, re-auth tokens and failures, pending e-mail
 * changes, settings, deletion and feature quotas. Every method takes an optional transaction.
 */
export class AccountStore {
  constructor(private readonly db: Database) {}

  /** Runs `fn` in one transaction. */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  /** Replaces a user's password hash; with `verifyEmail`, also marks the address verified. */
  async setPasswordHash(userId: string, hash: string, verifyEmail: boolean, tx: Tx = this.db): Promise<void> {
    await tx
      .update(users)
      .set({ passwordHash: hash, ...(verifyEmail ? { emailVerified: true } : {}), updatedAt: new Date() })
      .where(and(eq(users.id, userId), isNull(users.deletedAt)));
  }

  /** Sets the first password; false when the account has one already (checked in the same statement). */
  async setFirstPasswordHash(userId: string, hash: string, tx: Tx = this.db): Promise<boolean> {
    const rows = await tx
      .update(users)
      .set({ passwordHash: hash, updatedAt: new Date() })
      .where(and(eq(users.id, userId), isNull(users.passwordHash), isNull(users.deletedAt)))
      .returning({ id: users.id });
    return rows.length === 1;
  }

  /**
   * Revokes every live personal API key (`csk_`) of a user (a password reset or change: a key made
   * by whoever held the account must not outlive the new password); returns how many.
   */
  async revokePersonalApiKeys(userId: string, tx: Tx = this.db): Promise<number> {
    const rows = await tx
      .update(personalApiKeys)
      .set({ revokedAt: new Date() })
      .where(and(eq(personalApiKeys.userId, userId), isNull(personalApiKeys.revokedAt)))
      .returning({ id: personalApiKeys.id });
    return rows.length;
  }

  /** Marks every live refresh token of a user revoked. */
  async revokeRefreshTokens(userId: string, tx: Tx = this.db): Promise<void> {
    await tx
      .update(refreshTokens)
      .set({ revokedAt: new Date() })
      .where(and(eq(refreshTokens.userId, userId), isNull(refreshTokens.revokedAt)));
  }

  /** How many e-mailed tokens of a purpose were issued to a user since `since`. */
  async countEmailTokensSince(
    userId: string,
    purpose: string,
    since: Date,
    tx: Tx = this.db,
  ): Promise<number> {
    const [row] = await tx
      .select({ n: sql<number>`count(*)::int` })
      .from(emailTokens)
      .where(
        and(
          eq(emailTokens.userId, userId),
          eq(emailTokens.purpose, purpose),
          gte(emailTokens.createdAt, since),
        ),
      );
    return row?.n ?? 0;
  }

  /** Voids the unused e-mailed tokens of a purpose (a newer one replaces them, or one was used). */
  async voidEmailTokens(userId: string, purpose: string, tx: Tx = this.db): Promise<void> {
    await tx
      .update(emailTokens)
      .set({ usedAt: new Date() })
      .where(
        and(eq(emailTokens.userId, userId), eq(emailTokens.purpose, purpose), isNull(emailTokens.usedAt)),
      );
  }

  /** Stores a re-auth token (only its hash) and drops the user's spent and expired ones. */
  async insertReauthToken(
    row: { id: string; userId: string; purpose: string; secretHash: string; expiresAt: Date },
    tx: Tx = this.db,
  ): Promise<void> {
    await tx
      .delete(reauthTokens)
      .where(
        and(
          eq(reauthTokens.userId, row.userId),
          or(sql`${reauthTokens.usedAt} is not null`, lte(reauthTokens.expiresAt, new Date())),
        ),
      );
    await tx.insert(reauthTokens).values(row);
  }

  /**
   * Consumes a re-auth token once: marks it used in one statement only when it belongs to the user,
   * has the purpose and secret, and is unused and unexpired, so two concurrent uses cannot both pass.
   */
  async consumeReauthToken(
    input: { id: string; userId: string; purpose: string; secretHash: string },
    tx: Tx = this.db,
  ): Promise<boolean> {
    const rows = await tx
      .update(reauthTokens)
      .set({ usedAt: new Date() })
      .where(
        and(
          eq(reauthTokens.id, input.id),
          eq(reauthTokens.userId, input.userId),
          eq(reauthTokens.purpose, input.purpose),
          eq(reauthTokens.secretHash, input.secretHash),
          isNull(reauthTokens.usedAt),
          gt(reauthTokens.expiresAt, new Date()),
        ),
      )
      .returning({ id: reauthTokens.id });
    return rows.length === 1;
  }

  /**
   * Serialises the password re-auths of one user until the transaction ends, so that parallel
   * guesses are counted one after another and none slips past the lockout.
   */
  async lockReauth(userId: string, tx: Tx): Promise<void> {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`custos.reauth.${userId}`}, 0))`);
  }

  /** The times of a user's failed password re-auths since `since`. */
  async failuresSince(userId: string, since: Date, tx: Tx = this.db): Promise<Date[]> {
    const rows = await tx
      .select({ at: reauthFailures.failedAt })
      .from(reauthFailures)
      .where(and(eq(reauthFailures.userId, userId), gt(reauthFailures.failedAt, since)));
    return rows.map((r) => r.at);
  }

  /** Records a failed password re-auth and forgets the user's failures older than `forgetBefore`. */
  async recordFailure(userId: string, forgetBefore: Date, tx: Tx = this.db): Promise<void> {
    await tx
      .delete(reauthFailures)
      .where(and(eq(reauthFailures.userId, userId), lt(reauthFailures.failedAt, forgetBefore)));
    await tx.insert(reauthFailures).values({ userId, failedAt: new Date() });
  }

  /** Whether another user (deleted ones hold tombstone addresses) has this address. */
  async emailTaken(email: string, exceptUserId: string, tx: Tx = this.db): Promise<boolean> {
    const rows = await tx
      .select({ id: users.id })
      .from(users)
      .where(and(sql`lower(${users.email}) = ${email.toLowerCase()}`, sql`${users.id} <> ${exceptUserId}`));
    return rows.length > 0;
  }

  /** Stores the user's one pending e-mail change, replacing an earlier one. */
  async upsertEmailChange(
    row: { userId: string; newEmail: string; codeHash: string; expiresAt: Date },
    tx: Tx = this.db,
  ): Promise<void> {
    await tx
      .insert(emailChanges)
      .values({ ...row, attempts: 0, createdAt: new Date() })
      .onConflictDoUpdate({
        target: emailChanges.userId,
        set: {
          newEmail: row.newEmail,
          codeHash: row.codeHash,
          expiresAt: row.expiresAt,
          attempts: 0,
          createdAt: new Date(),
        },
      });
  }

  /**
   * Counts one verification attempt of the pending change, atomically, and returns it; undefined
   * when there is none, it expired, or its attempts are spent.
   */
  async countEmailChangeAttempt(
    userId: string,
    maxAttempts: number,
    tx: Tx = this.db,
  ): Promise<{ newEmail: string; codeHash: string; attempts: number } | undefined> {
    const rows = await tx
      .update(emailChanges)
      .set({ attempts: sql`${emailChanges.attempts} + 1` })
      .where(
        and(
          eq(emailChanges.userId, userId),
          lt(emailChanges.attempts, maxAttempts),
          gt(emailChanges.expiresAt, new Date()),
        ),
      )
      .returning({
        newEmail: emailChanges.newEmail,
        codeHash: emailChanges.codeHash,
        attempts: emailChanges.attempts,
      });
    return rows[0];
  }

  /** Removes the pending change with this code hash (once); returns its new address. */
  async takeEmailChange(userId: string, codeHash: string, tx: Tx = this.db): Promise<string | undefined> {
    const rows = await tx
      .delete(emailChanges)
      .where(and(eq(emailChanges.userId, userId), eq(emailChanges.codeHash, codeHash)))
      .returning({ newEmail: emailChanges.newEmail });
    return rows[0]?.newEmail;
  }

  /** Drops the user's pending e-mail change. */
  async deleteEmailChange(userId: string, tx: Tx = this.db): Promise<void> {
    await tx.delete(emailChanges).where(eq(emailChanges.userId, userId));
  }

  /** Stores the single-use token that undoes an e-mail change (only its hash) with the replaced address. */
  async insertEmailUndoToken(
    row: {
      id: string;
      userId: string;
      purpose: string;
      secretHash: string;
      expiresAt: Date;
      restoreEmail: string;
    },
    tx: Tx = this.db,
  ): Promise<void> {
    await tx.insert(emailTokens).values(row);
  }

  /**
   * Consumes an e-mail change undo token once: the row is locked, its secret compared (by
   * `matches`) before it is marked used, so a wrong secret leaves the owner's link working.
   */
  async consumeEmailUndoToken(
    id: string,
    purpose: string,
    matches: (secretHash: string) => boolean,
    tx: Tx,
  ): Promise<{ userId: string; restoreEmail: string; createdAt: Date } | undefined> {
    const [row] = await tx
      .select({
        userId: emailTokens.userId,
        secretHash: emailTokens.secretHash,
        restoreEmail: emailTokens.restoreEmail,
        createdAt: emailTokens.createdAt,
      })
      .from(emailTokens)
      .where(
        and(
          eq(emailTokens.id, id),
          eq(emailTokens.purpose, purpose),
          isNull(emailTokens.usedAt),
          gt(emailTokens.expiresAt, new Date()),
        ),
      )
      .for('update');
    if (!row || row.restoreEmail === null || !matches(row.secretHash)) return undefined;
    await tx.update(emailTokens).set({ usedAt: new Date() }).where(eq(emailTokens.id, id));
    return { userId: row.userId, restoreEmail: row.restoreEmail, createdAt: row.createdAt };
  }

  /**
   * Voids the unused e-mailed tokens of a purpose made at or after `since` (the undo links of the
   * changes that came after the one an undo reverts). Earlier ones stay usable.
   */
  async voidEmailTokensSince(userId: string, purpose: string, since: Date, tx: Tx): Promise<number> {
    const voided = await tx
      .update(emailTokens)
      .set({ usedAt: new Date() })
      .where(
        and(
          eq(emailTokens.userId, userId),
          eq(emailTokens.purpose, purpose),
          isNull(emailTokens.usedAt),
          gte(emailTokens.createdAt, since),
        ),
      )
      .returning({ id: emailTokens.id });
    return voided.length;
  }

  /** When the session (refresh family) `familyId` of a user started, if it is live. */
  async sessionStartedAt(familyId: string, userId: string, tx: Tx = this.db): Promise<Date | undefined> {
    const [row] = await tx
      .select({ started: sql<Date | null>`min(${refreshTokens.createdAt})` })
      .from(refreshTokens)
      .where(
        and(
          eq(refreshTokens.familyId, familyId),
          eq(refreshTokens.userId, userId),
          isNull(refreshTokens.revokedAt),
        ),
      );
    return row?.started ? new Date(row.started) : undefined;
  }

  /** The address of a live user, locked until the transaction ends. */
  async lockEmailOf(userId: string, tx: Tx): Promise<string | undefined> {
    const [row] = await tx
      .select({ email: users.email })
      .from(users)
      .where(and(eq(users.id, userId), isNull(users.deletedAt)))
      .for('update');
    return row?.email;
  }

  /** Sets a verified address; throws the unique violation when another account has it. */
  async setEmail(userId: string, email: string, tx: Tx = this.db): Promise<boolean> {
    const rows = await tx
      .update(users)
      .set({ email, emailVerified: true, updatedAt: new Date() })
      .where(and(eq(users.id, userId), isNull(users.deletedAt)))
      .returning({ id: users.id });
    return rows.length === 1;
  }

  /** The security settings of a live user. */
  async settings(userId: string, tx: Tx = this.db): Promise<StoredSettings | undefined> {
    const rows = await tx
      .select({
        requirePasskeyForVaults: users.requirePasskeyForVaults,
        requirePasskeyForMfa: users.requirePasskeyForMfa,
      })
      .from(users)
      .where(and(eq(users.id, userId), isNull(users.deletedAt)));
    return rows[0];
  }

  /** Changes the settings that are set. */
  async updateSettings(userId: string, change: Partial<StoredSettings>, tx: Tx = this.db): Promise<void> {
    await tx
      .update(users)
      .set({ ...change, updatedAt: new Date() })
      .where(and(eq(users.id, userId), isNull(users.deletedAt)));
  }

  /**
   * Soft-deletes a user: marks it deleted, swaps the address for a tombstone (freeing it), drops
   * the password. False when it was deleted already.
   */
  async softDeleteUser(userId: string, tombstone: string, tx: Tx = this.db): Promise<boolean> {
    const now = new Date();
    const rows = await tx
      .update(users)
      .set({ deletedAt: now, email: tombstone, passwordHash: null, updatedAt: now })
      .where(and(eq(users.id, userId), isNull(users.deletedAt)))
      .returning({ id: users.id });
    return rows.length === 1;
  }

  /** Drops a user's pending re-auth tokens (a deleted account keeps none). */
  async deleteReauthTokens(userId: string, tx: Tx = this.db): Promise<void> {
    await tx.delete(reauthTokens).where(eq(reauthTokens.userId, userId));
  }

  /**
   * Uses one call of a feature in a window, in ONE statement: the row of the window is created at 1
   * or incremented only while it is under `limit`, so parallel calls can never exceed it. Returns
   * the count after this call, or undefined when the window was full (nothing counted).
   */
  async consumeQuota(
    input: { userId: string; feature: string; windowStart: Date; limit: number },
    tx: Tx = this.db,
  ): Promise<number | undefined> {
    const rows = await tx
      .insert(featureQuotaUsage)
      .values({ userId: input.userId, feature: input.feature, windowStart: input.windowStart, used: 1 })
      .onConflictDoUpdate({
        target: [featureQuotaUsage.userId, featureQuotaUsage.feature, featureQuotaUsage.windowStart],
        set: { used: sql`${featureQuotaUsage.used} + 1` },
        setWhere: lt(featureQuotaUsage.used, input.limit),
      })
      .returning({ used: featureQuotaUsage.used });
    return rows[0]?.used;
  }

  /** Forgets a user's windows of a feature that started before `before`. */
  async pruneQuota(userId: string, feature: string, before: Date, tx: Tx = this.db): Promise<void> {
    await tx
      .delete(featureQuotaUsage)
      .where(
        and(
          eq(featureQuotaUsage.userId, userId),
          eq(featureQuotaUsage.feature, feature),
          lt(featureQuotaUsage.windowStart, before),
        ),
      );
  }
}
