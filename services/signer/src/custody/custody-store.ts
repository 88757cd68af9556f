import { and, asc, eq, ne, sql } from 'drizzle-orm';
import type { Database, Transaction } from '@custos/service-kit';
import { isUniqueViolation } from '../chains/chain-store.js';
import { clientShareWraps, signingKeys } from '../db/schema.js';
import type { SigningKeyRecord } from '../keys/key-types.js';
import { type StoredWrap, type Wrap, wrapOfRow, wrapParams } from './custody-fns.js';

type NewKey = Omit<SigningKeyRecord, 'createdAt' | 'rotatedAt' | 'isActive'>;

/** What an import's transaction ended with. */
export type ImportOutcome =
  | { key: SigningKeyRecord; previous: SigningKeyRecord | undefined }
  | 'conflict'
  | 'address_taken';

/** SQL of key custody: imports of keys, and the wraps of client_tss keys' user shares. */
export class CustodyStore {
  constructor(private readonly db: Database) {}

  /** A key version of the org by id (any custody, active or not). */
  async keyOfOrg(orgId: string, keyId: string): Promise<SigningKeyRecord | undefined> {
    const [row] = await this.db
      .select()
      .from(signingKeys)
      .where(and(eq(signingKeys.id, keyId), eq(signingKeys.orgId, orgId)));
    return row as SigningKeyRecord | undefined;
  }

  /** Whether another agent's active key of the family has this address. */
  async addressTaken(agentId: string, family: string, address: string, tx: Transaction | Database = this.db) {
    const [row] = await tx
      .select({ id: signingKeys.id })
      .from(signingKeys)
      .where(
        and(
          eq(signingKeys.family, family),
          eq(signingKeys.address, address),
          eq(signingKeys.isActive, true),
          ne(signingKeys.agentId, agentId),
        ),
      )
      .limit(1);
    return row !== undefined;
  }

  /**
   * Makes an imported key the agent's active key: replaces `previous` (still active) or, without
   * one, inserts the first. Imports of one address are serialized by a transaction lock on it, so
   * two agents never both hold it active (`address_taken`); `conflict` when `previous` changed
   * meanwhile or another active key appeared.
   */
  async importKey(
    previous: SigningKeyRecord | undefined,
    row: NewKey,
    after: (tx: Transaction, k: SigningKeyRecord, old: SigningKeyRecord | undefined) => Promise<unknown>,
  ): Promise<ImportOutcome> {
    try {
      return await this.db.transaction(async (tx) => {
        await tx.execute(
          sql`select pg_advisory_xact_lock(hashtextextended(${`signer.key_address:${row.family}:${row.address}`}, 0))`,
        );
        if (await this.addressTaken(row.agentId, row.family, row.address, tx))
          return 'address_taken' as const;
        let old: SigningKeyRecord | undefined;
        if (previous) {
          const [o] = await tx
            .update(signingKeys)
            .set({ isActive: false, rotatedAt: sql`now()` })
            .where(and(eq(signingKeys.id, previous.id), eq(signingKeys.isActive, true)))
            .returning();
          if (!o) return 'conflict' as const;
          old = o as SigningKeyRecord;
        }
        const [k] = await tx
          .insert(signingKeys)
          .values({ ...row, isActive: true })
          .returning();
        await after(tx, k as SigningKeyRecord, old);
        return { key: k as SigningKeyRecord, previous: old };
      });
    } catch (err) {
      if (isUniqueViolation(err)) return 'conflict';
      throw err;
    }
  }

  /** The stored wraps of a key, by type. */
  async wraps(keyId: string): Promise<StoredWrap[]> {
    const rows = await this.db
      .select()
      .from(clientShareWraps)
      .where(eq(clientShareWraps.keyId, keyId))
      .orderBy(asc(clientShareWraps.type));
    return rows.map(wrapOfRow);
  }

  /**
   * Stores wraps of types the key has none of yet, with their record; `conflict` when one of the
   * types is stored already (the primary key decides under races; nothing is stored then).
   */
  async insertWraps(
    key: SigningKeyRecord,
    createdBy: string,
    wraps: Wrap[],
    after: (tx: Transaction) => Promise<unknown>,
  ): Promise<'ok' | 'conflict'> {
    try {
      await this.db.transaction(async (tx) => {
        await tx.insert(clientShareWraps).values(
          wraps.map((w) => ({
            keyId: key.id,
            orgId: key.orgId,
            type: w.type,
            ciphertext: w.ciphertext,
            params: wrapParams(w),
            createdBy,
          })),
        );
        await after(tx);
      });
      return 'ok';
    } catch (err) {
      if (isUniqueViolation(err)) return 'conflict';
      throw err;
    }
  }

  /** Replaces the stored wrap of `wrap.type`, with its record; `missing` when there is none. */
  async replaceWrap(
    key: SigningKeyRecord,
    wrap: Wrap,
    after: (tx: Transaction) => Promise<unknown>,
  ): Promise<'ok' | 'missing'> {
    return this.db.transaction(async (tx) => {
      const [r] = await tx
        .update(clientShareWraps)
        .set({ ciphertext: wrap.ciphertext, params: wrapParams(wrap), updatedAt: sql`now()` })
        .where(and(eq(clientShareWraps.keyId, key.id), eq(clientShareWraps.type, wrap.type)))
        .returning({ type: clientShareWraps.type });
      if (!r) return 'missing' as const;
      await after(tx);
      return 'ok' as const;
    });
  }
}
