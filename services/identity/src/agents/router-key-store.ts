import { and, asc, eq, isNull } from 'drizzle-orm';
import type { Database, Transaction } from '@custos/service-kit';
import { routerKeys } from '../db/schema.js';

type Tx = Transaction | Database;

/** A router key row (its secret only as a hash). */
export type RouterKeyRow = typeof routerKeys.$inferSelect;

/** SQL of router keys. Every method takes an optional transaction. */
export class RouterKeyStore {
  constructor(private readonly db: Database) {}

  /** Stores a new key. */
  async insert(
    row: {
      tokenId: string;
      agentId: string;
      secretHash: string;
      maxConcurrentStreams: number | null;
      spendCapMicroUsd: number | null;
      createdBy: string;
    },
    tx: Tx = this.db,
  ): Promise<RouterKeyRow> {
    const [created] = await tx.insert(routerKeys).values(row).returning();
    return created!;
  }

  /** How many unrevoked keys an agent holds. */
  async countLive(agentId: string, tx: Tx = this.db): Promise<number> {
    const rows = await tx
      .select({ id: routerKeys.id })
      .from(routerKeys)
      .where(and(eq(routerKeys.agentId, agentId), isNull(routerKeys.revokedAt)));
    return rows.length;
  }

  /** An agent's keys, revoked ones included, oldest first. */
  listForAgent(agentId: string, tx: Tx = this.db): Promise<RouterKeyRow[]> {
    return tx
      .select()
      .from(routerKeys)
      .where(eq(routerKeys.agentId, agentId))
      .orderBy(asc(routerKeys.createdAt));
  }

  /** Revokes a live key of an agent; undefined when there is none by that id. */
  async revoke(agentId: string, id: string, tx: Tx = this.db): Promise<RouterKeyRow | undefined> {
    const rows = await tx
      .update(routerKeys)
      .set({ revokedAt: new Date() })
      .where(and(eq(routerKeys.id, id), eq(routerKeys.agentId, agentId), isNull(routerKeys.revokedAt)))
      .returning();
    return rows[0];
  }

  /** A live (unrevoked) key by its lookup id. */
  async findLive(tokenId: string, tx: Tx = this.db): Promise<RouterKeyRow | undefined> {
    const rows = await tx
      .select()
      .from(routerKeys)
      .where(and(eq(routerKeys.tokenId, tokenId), isNull(routerKeys.revokedAt)));
    return rows[0];
  }
}
