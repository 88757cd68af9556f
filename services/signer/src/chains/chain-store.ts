import { asc, eq, sql } from 'drizzle-orm';
import type { Database, Transaction } from '@custos/service-kit';
import { chains } from '../db/schema.js';
import type { ChainChange, ChainRecord, NewChain } from './chain-types.js';

type Db = Database | Transaction;

/** True for a Postgres unique violation, as pg or Drizzle (its cause) reports it. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; cause?: { code?: string } } | null;
  return e?.code === '23505' || e?.cause?.code === '23505';
}

/** SQL of the chains registry. */
export class ChainStore {
  constructor(private readonly db: Database) {}

  /** Every chain, by name (the registry is small: tens of rows). */
  async all(tx?: Db): Promise<ChainRecord[]> {
    const rows = await (tx ?? this.db).select().from(chains).orderBy(asc(chains.name));
    return rows as ChainRecord[];
  }

  /** Inserts the chains whose name is missing; existing ones (an admin's edits) are left alone. */
  async seed(rows: readonly NewChain[]): Promise<void> {
    if (rows.length === 0) return;
    await this.db
      .insert(chains)
      .values([...rows])
      .onConflictDoNothing();
  }

  /** Sets the rpc_url of a named chain (the install's CHAIN_RPC_URLS); false when there is none. */
  async setRpcUrl(name: string, rpcUrl: string): Promise<boolean> {
    const r = await this.db
      .update(chains)
      .set({ rpcUrl, updatedAt: sql`now()` })
      .where(eq(chains.name, name))
      .returning({ id: chains.id });
    return r.length > 0;
  }

  /** Registers the local chain, or points it at this URL and enables it again. */
  async upsertLocal(row: NewChain): Promise<void> {
    await this.db
      .insert(chains)
      .values(row)
      .onConflictDoUpdate({
        target: chains.name,
        set: { rpcUrl: row.rpcUrl, isEnabled: true, isTestnet: true, updatedAt: sql`now()` },
      });
  }

  /** Adds a chain; `taken` when its name, or its family and chain id, are in use. */
  async create(
    row: NewChain,
    audit: (tx: Transaction, c: ChainRecord) => Promise<unknown>,
  ): Promise<ChainRecord | 'taken'> {
    try {
      return await this.db.transaction(async (tx) => {
        const [inserted] = await tx.insert(chains).values(row).returning();
        await audit(tx, inserted as ChainRecord);
        return inserted as ChainRecord;
      });
    } catch (err) {
      if (isUniqueViolation(err)) return 'taken';
      throw err;
    }
  }

  /** Applies a change to a chain; undefined when it no longer exists. */
  async update(
    id: string,
    change: ChainChange,
    audit: (tx: Transaction, c: ChainRecord) => Promise<unknown>,
  ): Promise<ChainRecord | undefined> {
    return this.db.transaction(async (tx) => {
      const [row] = await tx
        .update(chains)
        .set({ ...change, updatedAt: sql`now()` })
        .where(eq(chains.id, id))
        .returning();
      if (!row) return undefined;
      await audit(tx, row as ChainRecord);
      return row as ChainRecord;
    });
  }
}
