import { and, asc, count, desc, eq, gt, lte } from 'drizzle-orm';
import type { Database, Transaction } from '@custos/service-kit';
import { auditEvents, chainHeads } from '../db/schema.js';
import { GENESIS_HASH, type StoredRecord, integrityHash } from './chain-fns.js';

/** A stored audit record. */
export type AuditRow = typeof auditEvents.$inferSelect;

/** A record about to be chained. */
export interface NewRecord {
  id: string;
  orgId: string;
  actorType: string;
  actorId: string | null;
  action: string;
  resourceType: string;
  resourceId: string | null;
  metadata: Record<string, unknown>;
  createdAt: Date;
  /** The service that produced it (the NATS subject's, or `audit` for its own records). */
  producer: string;
}

/** SQL of the audit chain. */
export class AuditStore {
  constructor(
    private readonly db: Database,
    private readonly key: Buffer,
  ) {}

  /**
   * Appends a record to its org's chain inside `tx`: the chain head row is locked, so appends of one
   * org are serialised (whichever replica or path makes them) and each links to the one before.
   */
  async append(tx: Transaction, r: NewRecord): Promise<AuditRow> {
    await tx.insert(chainHeads).values({ orgId: r.orgId, seq: 0, hash: GENESIS_HASH }).onConflictDoNothing();
    const [head] = await tx.select().from(chainHeads).where(eq(chainHeads.orgId, r.orgId)).for('update');
    if (!head) throw new Error('chain head vanished');
    const seq = head.seq + 1;
    const hash = integrityHash(this.key, { ...r, prevHash: head.hash });
    const [row] = await tx
      .insert(auditEvents)
      .values({ ...r, seq, prevHash: head.hash, integrityHash: hash })
      .returning();
    await tx
      .update(chainHeads)
      .set({ seq, hash, updatedAt: new Date() })
      .where(eq(chainHeads.orgId, r.orgId));
    return row!;
  }

  /** Appends in a transaction of its own. */
  async appendNow(r: NewRecord): Promise<AuditRow> {
    return this.db.transaction((tx) => this.append(tx, r));
  }

  /** An org's records, newest first, with the number that match in all. */
  async list(
    orgId: string,
    opts: { limit: number; offset: number; action: string },
  ): Promise<{ rows: AuditRow[]; total: number }> {
    const where = and(
      eq(auditEvents.orgId, orgId),
      opts.action ? eq(auditEvents.action, opts.action) : undefined,
    );
    const [rows, [total]] = await Promise.all([
      this.db
        .select()
        .from(auditEvents)
        .where(where)
        .orderBy(desc(auditEvents.seq))
        .limit(opts.limit)
        .offset(opts.offset),
      this.db.select({ n: count() }).from(auditEvents).where(where),
    ]);
    return { rows, total: Number(total?.n ?? 0) };
  }

  /** The stored head of an org's chain. */
  async head(orgId: string): Promise<{ seq: number; hash: string } | undefined> {
    const [h] = await this.db
      .select({ seq: chainHeads.seq, hash: chainHeads.hash })
      .from(chainHeads)
      .where(eq(chainHeads.orgId, orgId));
    return h;
  }

  /**
   * The records of an org's chain up to position `upTo` in sequence order, a page at a time. Verify
   * reads the head first and walks only up to it, so records appended meanwhile are not mistaken
   * for a mismatch with a head that was read before them.
   */
  async *walk(orgId: string, upTo: number, pageSize = 1000): AsyncGenerator<StoredRecord> {
    let after = 0;
    for (;;) {
      const page = await this.db
        .select()
        .from(auditEvents)
        .where(and(eq(auditEvents.orgId, orgId), gt(auditEvents.seq, after), lte(auditEvents.seq, upTo)))
        .orderBy(asc(auditEvents.seq))
        .limit(pageSize);
      for (const r of page) yield r;
      if (page.length < pageSize) return;
      after = page[page.length - 1]!.seq;
    }
  }
}
