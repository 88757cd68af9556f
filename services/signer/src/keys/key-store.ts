import { and, asc, eq, max, sql } from 'drizzle-orm';
import type { Database, Transaction } from '@custos/service-kit';
import { isUniqueViolation } from '../chains/chain-store.js';
import type { ChainFamily } from '../chains/chain-types.js';
import { signingKeys } from '../db/schema.js';
import type { SigningKeyRecord } from './key-types.js';

type NewKey = Omit<SigningKeyRecord, 'createdAt' | 'rotatedAt' | 'isActive'>;

/** SQL of signing keys (public halves). */
export class KeyStore {
  constructor(private readonly db: Database) {}

  /** Every version of every key of an agent of the org. */
  async list(orgId: string, agentId: string): Promise<SigningKeyRecord[]> {
    const rows = await this.db
      .select()
      .from(signingKeys)
      .where(and(eq(signingKeys.orgId, orgId), eq(signingKeys.agentId, agentId)))
      .orderBy(asc(signingKeys.createdAt));
    return rows as SigningKeyRecord[];
  }

  /** The active version of an agent's key for a family. */
  async active(orgId: string, agentId: string, family: ChainFamily): Promise<SigningKeyRecord | undefined> {
    const [row] = await this.db
      .select()
      .from(signingKeys)
      .where(
        and(
          eq(signingKeys.orgId, orgId),
          eq(signingKeys.agentId, agentId),
          eq(signingKeys.family, family),
          eq(signingKeys.isActive, true),
        ),
      );
    return row as SigningKeyRecord | undefined;
  }

  /** The version a new key of the agent for the family takes (1 for the first). */
  async nextVersion(agentId: string, family: ChainFamily): Promise<number> {
    const [r] = await this.db
      .select({ v: max(signingKeys.keyVersion) })
      .from(signingKeys)
      .where(and(eq(signingKeys.agentId, agentId), eq(signingKeys.family, family)));
    return (r?.v ?? 0) + 1;
  }

  /**
   * Inserts a first (or re-made) active key with its record; `conflict` when the agent already has
   * an active key for the family or the version was taken meanwhile (the unique indexes decide).
   */
  async insert(
    row: NewKey,
    after: (tx: Transaction, k: SigningKeyRecord) => Promise<unknown>,
  ): Promise<SigningKeyRecord | 'conflict'> {
    try {
      return await this.db.transaction(async (tx) => {
        const [k] = await tx
          .insert(signingKeys)
          .values({ ...row, isActive: true })
          .returning();
        await after(tx, k as SigningKeyRecord);
        return k as SigningKeyRecord;
      });
    } catch (err) {
      if (isUniqueViolation(err)) return 'conflict';
      throw err;
    }
  }

  /**
   * Replaces `previous` (still active) by `row` in one transaction, with its record and event;
   * `conflict` when `previous` was rotated meanwhile.
   */
  async rotate(
    previous: SigningKeyRecord,
    row: NewKey,
    after: (tx: Transaction, k: SigningKeyRecord, old: SigningKeyRecord) => Promise<unknown>,
  ): Promise<{ key: SigningKeyRecord; previous: SigningKeyRecord } | 'conflict'> {
    try {
      return await this.db.transaction(async (tx) => {
        const [old] = await tx
          .update(signingKeys)
          .set({ isActive: false, rotatedAt: sql`now()` })
          .where(and(eq(signingKeys.id, previous.id), eq(signingKeys.isActive, true)))
          .returning();
        if (!old) return 'conflict' as const;
        const [k] = await tx
          .insert(signingKeys)
          .values({ ...row, isActive: true })
          .returning();
        await after(tx, k as SigningKeyRecord, old as SigningKeyRecord);
        return { key: k as SigningKeyRecord, previous: old as SigningKeyRecord };
      });
    } catch (err) {
      if (isUniqueViolation(err)) return 'conflict';
      throw err;
    }
  }
}
