import { and, asc, count, eq, isNull, or, sql } from 'drizzle-orm';
import type { Database, Transaction } from '@custos/service-kit';
import { personalApiKeys } from '../db/schema.js';

type Tx = Transaction | Database;

/** A personal API key row (its secret only as a hash). */
export type PersonalKeyRow = typeof personalApiKeys.$inferSelect;

/** SQL of personal API keys. Every method takes an optional transaction. */
export class PersonalKeyStore {
  constructor(private readonly db: Database) {}

  /** Runs `fn` in one transaction. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  /** How many unrevoked keys a user holds. */
  async countLive(userId: string, tx: Tx = this.db): Promise<number> {
    const [row] = await tx
      .select({ n: count() })
      .from(personalApiKeys)
      .where(and(eq(personalApiKeys.userId, userId), isNull(personalApiKeys.revokedAt)));
    return row?.n ?? 0;
  }

  /** Stores a new key. */
  async insert(
    row: { tokenId: string; userId: string; name: string; secretHash: string; expiresAt: Date | null },
    tx: Tx = this.db,
  ): Promise<PersonalKeyRow> {
    const [created] = await tx.insert(personalApiKeys).values(row).returning();
    return created!;
  }

  /** A user's keys, oldest first. */
  listForUser(userId: string, tx: Tx = this.db): Promise<PersonalKeyRow[]> {
    return tx
      .select()
      .from(personalApiKeys)
      .where(eq(personalApiKeys.userId, userId))
      .orderBy(asc(personalApiKeys.createdAt));
  }

  /** Revokes a live key of a user; undefined when there is none by that id. */
  async revoke(userId: string, id: string, tx: Tx = this.db): Promise<PersonalKeyRow | undefined> {
    const rows = await tx
      .update(personalApiKeys)
      .set({ revokedAt: new Date() })
      .where(
        and(
          eq(personalApiKeys.id, id),
          eq(personalApiKeys.userId, userId),
          isNull(personalApiKeys.revokedAt),
        ),
      )
      .returning();
    return rows[0];
  }

  /** A key by its lookup id, revoked or not. */
  async findByTokenId(tokenId: string, tx: Tx = this.db): Promise<PersonalKeyRow | undefined> {
    const rows = await tx.select().from(personalApiKeys).where(eq(personalApiKeys.tokenId, tokenId));
    return rows[0];
  }

  /**
   * Records that a key was just used, if it is still unrevoked and unexpired at the database's
   * clock; false otherwise. A revocation in flight (a password reset) holds the row: this waits
   * for it and then sees the key revoked, so an exchange racing a reset never signs in.
   */
  async touch(id: string, tx: Tx = this.db): Promise<boolean> {
    const rows = await tx
      .update(personalApiKeys)
      .set({ lastUsedAt: new Date() })
      .where(
        and(
          eq(personalApiKeys.id, id),
          isNull(personalApiKeys.revokedAt),
          or(isNull(personalApiKeys.expiresAt), sql`${personalApiKeys.expiresAt} > now()`),
        ),
      )
      .returning({ id: personalApiKeys.id });
    return rows.length > 0;
  }
}
