import { and, asc, desc, eq, isNull, sql } from 'drizzle-orm';
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { OutboxRow } from '@custos/events';
import { type Database, type Transaction, lockOrgResource, withPgTransaction } from '@custos/service-kit';
import { SCHEMA, secretVersions, vaults } from '../db/schema.js';
import type { VaultRow } from '../vaults/vault-store.js';

/** A stored secret version (ciphertext included). */
export type SecretRow = typeof secretVersions.$inferSelect;
/** An audit record written inside a store method's transaction (see VaultCryptoAudit). */
export type AuditStep<R> = (tx: Transaction, row: R) => Promise<unknown>;
/** What a new version stores besides its address and number. */
export type NewVersion = Omit<typeof secretVersions.$inferInsert, 'vaultId' | 'orgId' | 'path' | 'version'>;

// The read path's one query (a named prepared statement: parsed and planned once per connection):
// the live vault and, in the same round trip, the latest live version at the path (or the named
// version, $3 > 0). Column order is what rowOfRead reads.
const VAULT_COLUMNS = [
  'id',
  'org_id',
  'name',
  'description',
  'created_by',
  'created_by_type',
  'is_system',
  'created_at',
  'deleted_at',
];
const SECRET_COLUMNS = [
  'id',
  'vault_id',
  'org_id',
  'path',
  'version',
  'type',
  'ciphertext',
  'iv',
  'tag',
  'wrapped_data_key',
  'kek_version',
  'metadata',
  'expires_at',
  'max_access_count',
  'access_count',
  'is_disabled',
  'rotation_policy',
  'created_by',
  'created_by_type',
  'created_at',
  'deleted_at',
];
const FIND_WITH_VAULT = `
  SELECT ${VAULT_COLUMNS.map((c) => `v.${c}`).join(', ')}, ${SECRET_COLUMNS.map((c) => `s.${c}`).join(', ')}
  FROM "${SCHEMA}".vaults v
  LEFT JOIN LATERAL (
    SELECT * FROM "${SCHEMA}".secret_versions sv
    WHERE sv.vault_id = v.id AND sv.path = $2 AND sv.deleted_at IS NULL AND ($3::int = 0 OR sv.version = $3::int)
    ORDER BY sv.version DESC LIMIT 1
  ) s ON true
  WHERE v.id = $1 AND v.deleted_at IS NULL`;

const bigintOrNull = (v: unknown): number | null => (v === null ? null : Number(v));

function vaultOfRead(r: unknown[]): VaultRow {
  return {
    id: r[0] as string,
    orgId: r[1] as string,
    name: r[2] as string,
    description: r[3] as string,
    createdBy: r[4] as string,
    createdByType: r[5] as string,
    isSystem: r[6] as boolean,
    createdAt: r[7] as Date,
    deletedAt: r[8] as Date | null,
  };
}

function secretOfRead(r: unknown[]): SecretRow | undefined {
  const o = VAULT_COLUMNS.length;
  if (r[o] === null) return undefined;
  return {
    id: r[o] as string,
    vaultId: r[o + 1] as string,
    orgId: r[o + 2] as string,
    path: r[o + 3] as string,
    version: r[o + 4] as number,
    type: r[o + 5] as string,
    ciphertext: r[o + 6] as Buffer,
    iv: r[o + 7] as Buffer,
    tag: r[o + 8] as Buffer,
    wrappedDataKey: r[o + 9] as Buffer,
    kekVersion: r[o + 10] as number,
    metadata: r[o + 11],
    expiresAt: r[o + 12] as Date | null,
    maxAccessCount: bigintOrNull(r[o + 13]),
    accessCount: Number(r[o + 14]),
    isDisabled: r[o + 15] as boolean,
    rotationPolicy: r[o + 16],
    createdBy: r[o + 17] as string,
    createdByType: r[o + 18] as string,
    createdAt: r[o + 19] as Date,
    deletedAt: r[o + 20] as Date | null,
  };
}

// A new version and its audit record in one statement (both or neither).
const INSERT_VERSION_WITH_RECORD = `
  WITH ins AS (
    INSERT INTO "${SCHEMA}".secret_versions (id, vault_id, org_id, path, version, type, ciphertext, iv, tag,
      wrapped_data_key, kek_version, metadata, expires_at, max_access_count, rotation_policy, created_by,
      created_by_type)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $13, $14, $15::jsonb, $16, $17)
    RETURNING ${SECRET_COLUMNS.join(', ')}
  ), record AS (
    INSERT INTO "${SCHEMA}".outbox (id, name, org_id, payload, traceparent)
    VALUES ($18, $19, $20, $21::jsonb, $22)
  )
  SELECT * FROM ins`;

const jsonOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : JSON.stringify(v));

/** SQL of secret versions. */
export class SecretStore {
  constructor(
    private readonly db: Database,
    /** The same pool, for the read path's prepared statement. */
    private readonly pool: pg.Pool,
  ) {}

  /**
   * The live vault `vaultId` and the latest live version at `path` in it (or `version`, when > 0),
   * in one round trip: undefined when there is no such vault; `secret` undefined when the path has
   * no such version.
   */
  async findWithVault(
    vaultId: string,
    path: string,
    version = 0,
  ): Promise<{ vault: VaultRow; secret: SecretRow | undefined } | undefined> {
    const r = await this.pool.query<unknown[]>({
      name: 'vault_crypto_find_with_vault',
      text: FIND_WITH_VAULT,
      values: [vaultId, path, version],
      rowMode: 'array',
    });
    const row = r.rows[0];
    if (!row) return undefined;
    return { vault: vaultOfRead(row), secret: secretOfRead(row) };
  }

  /**
   * Stores the next version of a path that has a live version already, with its audit record, in
   * four round trips and no query building: BEGIN; the path's write lock and its latest version
   * (`lock_path_latest`); the version and the record in one statement; COMMIT. Returns 'new_path'
   * (nothing written) when the path has no live version: starting one counts against the tier cap,
   * which insertNextVersion does. `record(row)` builds the audit record of the row to be stored.
   */
  async insertNextLiveVersion(
    at: { orgId: string; vaultId: string; path: string },
    seal: (version: number) => NewVersion,
    record: (row: { id: string; version: number; type: string }) => OutboxRow,
  ): Promise<SecretRow | 'new_path'> {
    return withPgTransaction(this.pool, async (client) => {
      const latest = await client.query<[number, Date | null]>({
        name: 'vault_crypto_lock_path_latest',
        text: `SELECT version, deleted_at FROM "${SCHEMA}".lock_path_latest($1, $2)`,
        values: [at.vaultId, at.path],
        rowMode: 'array',
      });
      const top = latest.rows[0];
      // Nothing written: committing only releases the path's lock.
      if (!top || top[1] !== null) return 'new_path' as const;
      const version = top[0] + 1;
      const id = randomUUID();
      const v = seal(version);
      const r = record({ id, version, type: v.type });
      const inserted = await client.query<unknown[]>({
        name: 'vault_crypto_insert_version_with_record',
        text: INSERT_VERSION_WITH_RECORD,
        values: [
          id,
          at.vaultId,
          at.orgId,
          at.path,
          version,
          v.type,
          v.ciphertext,
          v.iv,
          v.tag,
          v.wrappedDataKey,
          v.kekVersion,
          jsonOrNull(v.metadata),
          v.expiresAt ?? null,
          v.maxAccessCount ?? null,
          jsonOrNull(v.rotationPolicy),
          v.createdBy,
          v.createdByType,
          r.id,
          r.name,
          r.orgId,
          r.payload,
          r.traceparent,
        ],
        rowMode: 'array',
      });
      return secretOfRead([...Array(VAULT_COLUMNS.length).fill(null), ...inserted.rows[0]!])!;
    });
  }

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

  /** A live (not deleted) version by its id, in the org. */
  async byId(orgId: string, id: string): Promise<SecretRow | undefined> {
    const [row] = await this.db
      .select()
      .from(secretVersions)
      .where(
        and(eq(secretVersions.id, id), eq(secretVersions.orgId, orgId), isNull(secretVersions.deletedAt)),
      );
    return row;
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
