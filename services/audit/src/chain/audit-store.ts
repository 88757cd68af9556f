import { and, asc, count, desc, eq, gt, gte, lte, max, sql } from 'drizzle-orm';
import type { BatchTx } from '@custos/events';
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

/** A record as appendBatch chained it. */
export interface ChainedRecord {
  id: string;
  orgId: string;
  seq: number;
  action: string;
}

// The statements of appendBatch, prepared once per connection (named): the consumer runs them for
// every batch, and building them with Drizzle per call was most of the service's CPU.
const HEADS_INSERT = {
  name: 'audit_heads_insert',
  text:
    'INSERT INTO audit.chain_heads (org_id, seq, hash) SELECT unnest($1::uuid[]), 0, $2 ' +
    'ON CONFLICT (org_id) DO NOTHING',
};
// ORDER BY then FOR UPDATE: Postgres locks the rows in the sorted order, so two replicas that
// append to the same orgs take their locks in the same order and cannot deadlock on them.
const HEADS_LOCK = {
  name: 'audit_heads_lock',
  text:
    'SELECT org_id, seq, hash FROM audit.chain_heads WHERE org_id = ANY($1::uuid[]) ' +
    'ORDER BY org_id FOR UPDATE',
};
// The records and the heads' new positions in one statement (one round trip per batch, not two).
const EVENTS_INSERT_HEADS_UPDATE = {
  name: 'audit_events_insert_heads_update',
  text:
    'WITH inserted AS (INSERT INTO audit.events (id, org_id, seq, actor_type, actor_id, action, ' +
    'resource_type, resource_id, metadata, created_at, prev_hash, integrity_hash, producer) ' +
    'SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::text[], $5::text[], $6::text[], ' +
    '$7::text[], $8::text[], $9::jsonb[], $10::timestamptz[], $11::text[], $12::text[], $13::text[])) ' +
    'UPDATE audit.chain_heads h SET seq = v.seq, hash = v.hash, updated_at = now() ' +
    'FROM unnest($14::uuid[], $15::bigint[], $16::text[]) AS v(org_id, seq, hash) WHERE h.org_id = v.org_id',
};

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

  /**
   * Appends records to their orgs' chains inside the transaction `client` is in, in the order
   * given within each org: each org's head is locked once (all heads in one statement, in org id
   * order), its records are hashed in order and inserted with the others in one statement, and
   * each head is moved once. Appends of one org stay serialised with every other path (`append`
   * locks the same row).
   */
  async appendBatch(client: BatchTx, records: readonly NewRecord[]): Promise<ChainedRecord[]> {
    if (records.length === 0) return [];
    // Postgres prints uuids in lower case: the heads it returns are matched on that form, while the
    // record keeps the org id it was sent with (the HMAC covers that text, as `append` does).
    const byOrg = new Map<string, NewRecord[]>();
    for (const r of records) {
      const org = r.orgId.toLowerCase();
      const list = byOrg.get(org);
      if (list) list.push(r);
      else byOrg.set(org, [r]);
    }
    const orgs = [...byOrg.keys()].sort();
    await client.query({ ...HEADS_INSERT, values: [orgs, GENESIS_HASH] });
    const { rows: heads } = await client.query<{ org_id: string; seq: string; hash: string }>({
      ...HEADS_LOCK,
      values: [orgs],
    });
    if (heads.length !== orgs.length) throw new Error('chain head vanished');
    const cols: unknown[][] = Array.from({ length: 13 }, () => []);
    const headOrgs: string[] = [];
    const headSeqs: string[] = [];
    const headHashes: string[] = [];
    const chained: ChainedRecord[] = [];
    for (const head of heads) {
      let seq = Number(head.seq);
      let prevHash = head.hash;
      for (const r of byOrg.get(head.org_id)!) {
        seq += 1;
        const hash = integrityHash(this.key, { ...r, prevHash });
        const values = [
          r.id,
          r.orgId,
          String(seq),
          r.actorType,
          r.actorId,
          r.action,
          r.resourceType,
          r.resourceId,
          JSON.stringify(r.metadata),
          r.createdAt.toISOString(),
          prevHash,
          hash,
          r.producer,
        ];
        for (let i = 0; i < values.length; i++) cols[i]!.push(values[i]);
        chained.push({ id: r.id, orgId: r.orgId, seq, action: r.action });
        prevHash = hash;
      }
      headOrgs.push(head.org_id);
      headSeqs.push(String(seq));
      headHashes.push(prevHash);
    }
    await client.query({ ...EVENTS_INSERT_HEADS_UPDATE, values: [...cols, headOrgs, headSeqs, headHashes] });
    return chained;
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

  /**
   * How many records of `action` an org has since `since`, by the string `key` of their metadata
   * (`unknown` when absent), most frequent first, with the newest of each.
   */
  async countByMetadata(
    orgId: string,
    action: string,
    key: string,
    since: Date,
  ): Promise<Array<{ value: string; n: number; lastAt: Date }>> {
    const value = sql<string>`coalesce(${auditEvents.metadata} ->> ${key}, 'unknown')`;
    const rows = await this.db
      .select({ value, n: count(), lastAt: max(auditEvents.createdAt) })
      .from(auditEvents)
      .where(
        and(eq(auditEvents.orgId, orgId), eq(auditEvents.action, action), gte(auditEvents.createdAt, since)),
      )
      // By position: the key is a parameter, so each spelling of the expression would differ.
      .groupBy(sql`1`)
      .orderBy(desc(count()), sql`1`);
    return rows.map((r) => ({ value: r.value, n: Number(r.n), lastAt: r.lastAt ?? since }));
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
