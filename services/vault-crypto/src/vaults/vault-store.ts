import { and, asc, count, eq, inArray, isNull, or, sql } from 'drizzle-orm';
import type pg from 'pg';
import { type Database, type Transaction, lockOrgResource } from '@custos/service-kit';
import { SCHEMA, secretVersions, vaults } from '../db/schema.js';
import { SYSTEM_VAULT_NAMES } from './vault-fns.js';

/** A stored vault. */
export type VaultRow = typeof vaults.$inferSelect;

type Db = Database | Transaction;

/** SQL of vaults. */
export class VaultStore {
  constructor(
    private readonly db: Database,
    /** The same pool, for `get`'s prepared statement (every secret operation starts with it). */
    private readonly pool?: pg.Pool,
  ) {}

  /** A live vault by id. */
  async get(id: string, tx?: Db): Promise<VaultRow | undefined> {
    if (!tx && this.pool) {
      const r = await this.pool.query<VaultRow>({
        name: 'vault_crypto_vault_get',
        text: `SELECT id, org_id AS "orgId", name, description, created_by AS "createdBy",
                 created_by_type AS "createdByType", is_system AS "isSystem", created_at AS "createdAt",
                 deleted_at AS "deletedAt"
               FROM "${SCHEMA}".vaults WHERE id = $1 AND deleted_at IS NULL`,
        values: [id],
      });
      return r.rows[0];
    }
    const [row] = await (tx ?? this.db)
      .select()
      .from(vaults)
      .where(and(eq(vaults.id, id), isNull(vaults.deletedAt)));
    return row;
  }

  /** Live non-system vaults of an org, oldest first; `onlyIds`/`ownedBy` narrow them (agents). */
  async list(orgId: string, narrow?: { ids: readonly string[]; ownerId: string }): Promise<VaultRow[]> {
    const conditions = [eq(vaults.orgId, orgId), isNull(vaults.deletedAt), eq(vaults.isSystem, false)];
    if (narrow) {
      const owned = eq(vaults.createdBy, narrow.ownerId);
      conditions.push(narrow.ids.length > 0 ? or(owned, inArray(vaults.id, [...narrow.ids]))! : owned);
    }
    return this.db
      .select()
      .from(vaults)
      .where(and(...conditions))
      .orderBy(asc(vaults.createdAt), asc(vaults.id));
  }

  /** A live vault of the org by exact name. */
  async findByName(orgId: string, name: string): Promise<VaultRow | undefined> {
    const [row] = await this.db
      .select()
      .from(vaults)
      .where(and(eq(vaults.orgId, orgId), eq(vaults.name, name), isNull(vaults.deletedAt)));
    return row;
  }

  /** Creates the org's system vaults if they are missing (idempotent under races). */
  async ensureSystemVaults(orgId: string): Promise<void> {
    await this.db
      .insert(vaults)
      .values(
        SYSTEM_VAULT_NAMES.map((name) => ({
          orgId,
          name,
          description: 'System vault: not available through the secrets API.',
          createdBy: orgId,
          createdByType: 'system',
          isSystem: true,
        })),
      )
      .onConflictDoNothing();
  }

  /**
   * Inserts a vault unless the org is at `maxVaults` (negative: unlimited) or the name is taken;
   * the cap is counted under the org's advisory lock so racing creates cannot overshoot.
   */
  async create(
    row: typeof vaults.$inferInsert,
    maxVaults: number,
    audit: (tx: Transaction, vault: VaultRow) => Promise<unknown>,
  ): Promise<{ vault: VaultRow } | { refused: 'cap' | 'name_taken' }> {
    return this.db.transaction(async (tx) => {
      await lockOrgResource(tx, row.orgId, 'vaults');
      if (maxVaults >= 0) {
        const [c] = await tx
          .select({ n: count() })
          .from(vaults)
          .where(and(eq(vaults.orgId, row.orgId), isNull(vaults.deletedAt), eq(vaults.isSystem, false)));
        if ((c?.n ?? 0) >= maxVaults) return { refused: 'cap' as const };
      }
      const [inserted] = await tx.insert(vaults).values(row).onConflictDoNothing().returning();
      if (!inserted) return { refused: 'name_taken' as const };
      await audit(tx, inserted);
      return { vault: inserted };
    });
  }

  /** Deletes a vault and soft-deletes every live secret version in it. */
  async delete(id: string, audit: (tx: Transaction) => Promise<unknown>): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const done = await tx
        .update(vaults)
        .set({ deletedAt: sql`now()` })
        .where(and(eq(vaults.id, id), isNull(vaults.deletedAt)))
        .returning({ id: vaults.id });
      if (done.length === 0) return false;
      await tx
        .update(secretVersions)
        .set({ deletedAt: sql`now()` })
        .where(and(eq(secretVersions.vaultId, id), isNull(secretVersions.deletedAt)));
      await audit(tx);
      return true;
    });
  }
}
