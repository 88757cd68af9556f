import { and, count, eq, gt, isNull, lt, or, sql } from 'drizzle-orm';
import type { Database } from '@custos/service-kit';
import { mfaChallenges, recoveryCodes, users } from '../db/schema.js';
import { MFA_MAX_ATTEMPTS } from './mfa-fns.js';
import type { TotpState } from './mfa-types.js';

/** A transaction, or the database itself outside one. */
export type MfaTx = Parameters<Parameters<Database['transaction']>[0]>[0] | Database;

/** SQL of TOTP secrets, recovery codes and MFA challenges. Every method takes an optional transaction. */
export class MfaStore {
  constructor(private readonly db: Database) {}

  /** Runs `fn` in one transaction. */
  transaction<T>(fn: (tx: MfaTx) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  /** Users whose TOTP secret (enabled or pending) is still sealed in `format` (first byte). */
  async sealedInFormat(
    format: number,
  ): Promise<Array<{ userId: string; secretEnc: Buffer | null; pendingSecretEnc: Buffer | null }>> {
    return this.db
      .select({
        userId: users.id,
        secretEnc: users.totpSecretEnc,
        pendingSecretEnc: users.totpPendingSecretEnc,
      })
      .from(users)
      .where(
        or(
          sql`get_byte(${users.totpSecretEnc}, 0) = ${format}`,
          sql`get_byte(${users.totpPendingSecretEnc}, 0) = ${format}`,
        ),
      );
  }

  /** Replaces a user's sealed secrets if they are still `expected` (a concurrent change wins). */
  async replaceSealed(
    userId: string,
    expected: { secretEnc: Buffer | null; pendingSecretEnc: Buffer | null },
    next: { secretEnc: Buffer | null; pendingSecretEnc: Buffer | null },
  ): Promise<void> {
    await this.db
      .update(users)
      .set({ totpSecretEnc: next.secretEnc, totpPendingSecretEnc: next.pendingSecretEnc })
      .where(
        and(
          eq(users.id, userId),
          sql`${users.totpSecretEnc} IS NOT DISTINCT FROM ${expected.secretEnc}`,
          sql`${users.totpPendingSecretEnc} IS NOT DISTINCT FROM ${expected.pendingSecretEnc}`,
        ),
      );
  }

  /** The TOTP columns of a live user. */
  async totpState(userId: string, tx: MfaTx = this.db): Promise<TotpState | undefined> {
    const rows = await tx
      .select({
        userId: users.id,
        orgId: users.orgId,
        email: users.email,
        enabled: users.totpEnabled,
        secretEnc: users.totpSecretEnc,
        pendingSecretEnc: users.totpPendingSecretEnc,
        lastStep: users.totpLastStep,
      })
      .from(users)
      .where(and(eq(users.id, userId), isNull(users.deletedAt)));
    return rows[0];
  }

  /** Stores (or replaces) the pending secret; false when TOTP is already enabled. */
  async setPendingSecret(userId: string, sealed: Buffer, tx: MfaTx = this.db): Promise<boolean> {
    const rows = await tx
      .update(users)
      .set({ totpPendingSecretEnc: sealed, updatedAt: new Date() })
      .where(and(eq(users.id, userId), eq(users.totpEnabled, false), isNull(users.deletedAt)))
      .returning({ id: users.id });
    return rows.length === 1;
  }

  /**
   * Promotes the pending secret that was checked (compared byte for byte, so a setup that replaced
   * it meanwhile wins) to the enabled one and records the step its code used. False when TOTP is
   * enabled already or the pending secret changed.
   */
  async enableTotp(
    userId: string,
    checkedPending: Buffer,
    step: number,
    tx: MfaTx = this.db,
  ): Promise<boolean> {
    const rows = await tx
      .update(users)
      .set({
        totpEnabled: true,
        totpSecretEnc: checkedPending,
        totpPendingSecretEnc: null,
        totpLastStep: step,
        updatedAt: new Date(),
      })
      .where(
        and(
          eq(users.id, userId),
          eq(users.totpEnabled, false),
          eq(users.totpPendingSecretEnc, checkedPending),
        ),
      )
      .returning({ id: users.id });
    return rows.length === 1;
  }

  /** Turns TOTP off and forgets the secrets, the recovery codes and any open challenge. */
  async disableTotp(userId: string, tx: MfaTx = this.db): Promise<void> {
    await tx
      .update(users)
      .set({
        totpEnabled: false,
        totpSecretEnc: null,
        totpPendingSecretEnc: null,
        totpLastStep: null,
        updatedAt: new Date(),
      })
      .where(eq(users.id, userId));
    await tx.delete(recoveryCodes).where(eq(recoveryCodes.userId, userId));
    await tx.delete(mfaChallenges).where(eq(mfaChallenges.userId, userId));
  }

  /**
   * Records `step` as the last accepted TOTP step if it is later than the recorded one, in one
   * statement, so the same code cannot be accepted twice even by concurrent requests.
   */
  async advanceTotpStep(userId: string, step: number, tx: MfaTx = this.db): Promise<boolean> {
    const rows = await tx
      .update(users)
      .set({ totpLastStep: step })
      .where(
        and(
          eq(users.id, userId),
          eq(users.totpEnabled, true),
          or(isNull(users.totpLastStep), lt(users.totpLastStep, step)),
        ),
      )
      .returning({ id: users.id });
    return rows.length === 1;
  }

  /** Replaces the user's recovery codes with new hashes. */
  async replaceRecoveryCodes(userId: string, hashes: string[], tx: MfaTx = this.db): Promise<void> {
    await tx.delete(recoveryCodes).where(eq(recoveryCodes.userId, userId));
    if (hashes.length > 0)
      await tx.insert(recoveryCodes).values(hashes.map((codeHash) => ({ userId, codeHash })));
  }

  /** Hashes of the recovery codes not used yet. */
  async unusedRecoveryHashes(userId: string, tx: MfaTx = this.db): Promise<string[]> {
    const rows = await tx
      .select({ codeHash: recoveryCodes.codeHash })
      .from(recoveryCodes)
      .where(and(eq(recoveryCodes.userId, userId), isNull(recoveryCodes.usedAt)));
    return rows.map((r) => r.codeHash);
  }

  /** How many recovery codes are left. */
  async countUnusedRecoveryCodes(userId: string, tx: MfaTx = this.db): Promise<number> {
    const rows = await tx
      .select({ n: count() })
      .from(recoveryCodes)
      .where(and(eq(recoveryCodes.userId, userId), isNull(recoveryCodes.usedAt)));
    return Number(rows[0]?.n ?? 0);
  }

  /** Spends a recovery code once; false when it was spent already (also by a concurrent request). */
  async useRecoveryCode(userId: string, codeHash: string, tx: MfaTx = this.db): Promise<boolean> {
    const rows = await tx
      .update(recoveryCodes)
      .set({ usedAt: new Date() })
      .where(
        and(
          eq(recoveryCodes.userId, userId),
          eq(recoveryCodes.codeHash, codeHash),
          isNull(recoveryCodes.usedAt),
        ),
      )
      .returning({ userId: recoveryCodes.userId });
    return rows.length === 1;
  }

  /** Stores a challenge (only the hash of its secret). */
  async insertChallenge(
    row: { id: string; userId: string; secretHash: string; expiresAt: Date },
    tx: MfaTx = this.db,
  ): Promise<void> {
    await tx.insert(mfaChallenges).values(row);
  }

  /** A challenge by the id part of its token. */
  async findChallenge(id: string, tx: MfaTx = this.db) {
    const rows = await tx.select().from(mfaChallenges).where(eq(mfaChallenges.id, id));
    return rows[0];
  }

  /** Locks the user's row until the transaction ends, so per-user attempt counting is serial. */
  async lockUser(userId: string, tx: MfaTx): Promise<void> {
    await tx.select({ id: users.id }).from(users).where(eq(users.id, userId)).for('no key update');
  }

  /**
   * Failed second-factor attempts of the user on challenges started since `since`: every attempt
   * counts, less the one that succeeded on each used challenge.
   */
  async recentFailedAttempts(userId: string, since: Date, tx: MfaTx = this.db): Promise<number> {
    const rows = await tx
      .select({
        attempts: sql<string>`coalesce(sum(${mfaChallenges.attempts}), 0)`,
        used: count(mfaChallenges.usedAt),
      })
      .from(mfaChallenges)
      .where(and(eq(mfaChallenges.userId, userId), gt(mfaChallenges.createdAt, since)));
    return Number(rows[0]?.attempts ?? 0) - Number(rows[0]?.used ?? 0);
  }

  /**
   * Counts one attempt against a live challenge, in one statement; false when the challenge is
   * used, expired or has had its MFA_MAX_ATTEMPTS already, so concurrent guesses cannot exceed it.
   */
  async countAttempt(id: string, tx: MfaTx = this.db): Promise<boolean> {
    const rows = await tx
      .update(mfaChallenges)
      .set({ attempts: sql`${mfaChallenges.attempts} + 1` })
      .where(
        and(
          eq(mfaChallenges.id, id),
          isNull(mfaChallenges.usedAt),
          gt(mfaChallenges.expiresAt, new Date()),
          lt(mfaChallenges.attempts, MFA_MAX_ATTEMPTS),
        ),
      )
      .returning({ id: mfaChallenges.id });
    return rows.length === 1;
  }

  /** Marks a challenge used, in one statement: of concurrent uses exactly one gets true. */
  async consumeChallenge(id: string, tx: MfaTx = this.db): Promise<boolean> {
    const rows = await tx
      .update(mfaChallenges)
      .set({ usedAt: new Date() })
      .where(
        and(eq(mfaChallenges.id, id), isNull(mfaChallenges.usedAt), gt(mfaChallenges.expiresAt, new Date())),
      )
      .returning({ id: mfaChallenges.id });
    return rows.length === 1;
  }

  /** Deletes the user's challenges started before `before` (long expired, and out of the failure window). */
  async pruneChallenges(userId: string, before: Date, tx: MfaTx = this.db): Promise<void> {
    await tx
      .delete(mfaChallenges)
      .where(and(eq(mfaChallenges.userId, userId), lt(mfaChallenges.createdAt, before)));
  }
}
