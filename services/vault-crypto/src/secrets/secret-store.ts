import { and, asc, desc, eq, isNull, sql } from 'drizzle-orm';
import { type Database, type Transaction, lockOrgResource } from '@custos/service-kit';
import { secretVersions, vaults } from '../db/schema.js';

/** A stored secret version (ciphertext included). */
export type SecretRow = typeof secretVersions.$inferSelect;
/** An audit record written inside a store method's transaction (see VaultCryptoAudit). */
export type AuditStep<R> = (tx: Transaction, row: R) => Promise<unknown>;
/** What a new version stores besides its address and number. */
export type NewVersion = Omit<typeof secretVersions.$inferInsert, 'vaultId' | 'orgId' | 'path' | 'version'>;

/** SQL of secret versions. */
export class SecretStore {
  constructor(private readonly db: Database) {}

  /**
   * Stores the next version of a path. Writers of one path are serialised by an advisory lock so
   * version numbers are dense; a write that starts a new live path takes the org's secrets lock and
   * counts live paths first, so racing writes cannot pass `maxSecrets` (negative: unlimited).
   * `seal(version)` builds the row (the version is part of the associated data).
   */
  async insertNextVersion(
    at: { orgId: string; vaultId: string; path: string },
    maxSecrets: number,
    seal: (version: number) => NewVersion,
    audit: AuditStep<SecretRow>,
  ): Promise<SecretRow | 'cap'> {
    return this.db.transaction(async (tx) => {
      await tx.execute(sql`SELECT pg_advisory_xact_lock(hashtext(${at.vaultId}), hashtext(${at.path}))`);
      const [latest] = await tx
        .select({ version: secretVersions.version, deletedAt: secretVersions.deletedAt })
        .from(secretVersions)
        .where(and(eq(secretVersions.vaultId, at.vaultId), eq(secretVersions.path, at.path)))
        .orderBy(desc(secretVersions.version))
        .limit(1);
      const startsLivePath = !latest || latest.deletedAt !== null;
      if (startsLivePath && maxSecrets >= 0 && (await this.countLivePaths(tx, at.orgId)) >= maxSecrets) {
        return 'cap' as const;
      }
      const version = (latest?.version ?? 0) + 1;
      const [row] = await tx
        .insert(secretVersions)
        .values({ ...seal(version), ...at, version })
        .returning();
      await audit(tx, row!);
      return row!;
    });
  }

  // Live paths of the org's non-system vaults, under the org's secrets lock.
  private async countLivePaths(tx: Transaction, orgId: string): Promise<number> {
    await lockOrgResource(tx, orgId, 'secrets');
    const r = await tx.execute<{ n: string }>(sql`
      SELECT count(DISTINCT (s.vault_id, s.path)) AS n
      FROM ${secretVersions} s JOIN ${vaults} v ON v.id = s.vault_id
      WHERE s.org_id = ${orgId} AND s.deleted_at IS NULL AND NOT v.is_system`);
    return Number(r.rows[0]?.n ?? 0);
  }

  /** The latest live version of a path, or a named version of it. */
  async find(vaultId: string, path: string, version = 0): Promise<SecretRow | undefined> {
    const [row] = await this.db
      .select()
      .from(secretVersions)
      .where(
        and(
          eq(secretVersions.vaultId, vaultId),
          eq(secretVersions.path, path),
          isNull(secretVersions.deletedAt),
          version > 0 ? eq(secretVersions.version, version) : undefined,
        ),
      )
      .orderBy(desc(secretVersions.version))
      .limit(1);
    return row;
  }

  /**
   * Counts one read of the version if it is readable at the database's clock: not disabled, not
   * expired, and under its `max_access_count` — checked and incremented in one statement, so
   * concurrent reads can never pass the limit.
   */
  async countRead(id: string, tx: Database | Transaction = this.db): Promise<SecretRow | undefined> {
    const [row] = await tx
      .update(secretVersions)
      .set({ accessCount: sql`${secretVersions.accessCount} + 1` })
      .where(
        and(
          eq(secretVersions.id, id),
          isNull(secretVersions.deletedAt),
          eq(secretVersions.isDisabled, false),
          sql`(${secretVersions.expiresAt} IS NULL OR ${secretVersions.expiresAt} > now())`,
          sql`(${secretVersions.maxAccessCount} IS NULL OR ${secretVersions.accessCount} < ${secretVersions.maxAccessCount})`,
        ),
      )
      .returning();
    return row;
  }

  /**
   * Commits one read of `row` with its audit record: a version with a read limit is counted first
   * (undefined when it is exhausted or expired by then, and nothing is written); the record is
   * written in the same transaction, so a read that cannot be audited is not counted either.
   */
  async recordRead(row: SecretRow, audit: AuditStep<SecretRow>): Promise<SecretRow | undefined> {
    return this.db.transaction(async (tx) => {
      const counted = row.maxAccessCount !== null ? await this.countRead(row.id, tx) : row;
      if (!counted) return undefined;
      await audit(tx, counted);
      return counted;
    });
  }

  /** The latest live version of every path (optionally under a prefix), in path order. */
  async listLatest(vaultId: string, prefix: string): Promise<SecretRow[]> {
    return this.db
      .selectDistinctOn([secretVersions.path])
      .from(secretVersions)
      .where(
        and(
          eq(secretVersions.vaultId, vaultId),
          isNull(secretVersions.deletedAt),
          prefix ? sql`left(${secretVersions.path}, ${prefix.length}) = ${prefix}` : undefined,
        ),
      )
      .orderBy(asc(secretVersions.path), desc(secretVersions.version));
  }

  /** Every live version of a path, newest first. */
  async listVersions(vaultId: string, path: string): Promise<SecretRow[]> {
    return this.db
      .select()
      .from(secretVersions)
      .where(
        and(
          eq(secretVersions.vaultId, vaultId),
          eq(secretVersions.path, path),
          isNull(secretVersions.deletedAt),
        ),
      )
      .orderBy(desc(secretVersions.version));
  }

  /** Soft-deletes every live version of a path; false when there was none. */
  async softDelete(vaultId: string, path: string, audit: AuditStep<number>): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const r = await tx
        .update(secretVersions)
        .set({ deletedAt: sql`now()` })
        .where(
          and(
            eq(secretVersions.vaultId, vaultId),
            eq(secretVersions.path, path),
            isNull(secretVersions.deletedAt),
          ),
        )
        .returning({ id: secretVersions.id });
      if (r.length === 0) return false;
      await audit(tx, r.length);
      return true;
    });
  }

  /** Disables one live version; undefined when there is no such version. */
  async disable(
    vaultId: string,
    path: string,
    version: number,
    audit: AuditStep<SecretRow>,
  ): Promise<SecretRow | undefined> {
    return this.db.transaction(async (tx) => {
      const [row] = await tx
        .update(secretVersions)
        .set({ isDisabled: true })
        .where(
          and(
            eq(secretVersions.vaultId, vaultId),
            eq(secretVersions.path, path),
            eq(secretVersions.version, version),
            isNull(secretVersions.deletedAt),
          ),
        )
        .returning();
      if (row) await audit(tx, row);
      return row;
    });
  }

  /** Replaces a version's wrapped data key if it is still wrapped by `fromKekVersion`. */
  async rewrap(id: string, fromKekVersion: number, wrapped: Buffer, kekVersion: number): Promise<void> {
    await this.db
      .update(secretVersions)
      .set({ wrappedDataKey: wrapped, kekVersion })
      .where(and(eq(secretVersions.id, id), eq(secretVersions.kekVersion, fromKekVersion)));
  }
}
