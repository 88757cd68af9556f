import { and, asc, count, desc, eq, gt, lte, sql } from 'drizzle-orm';
import type { Database } from '@custos/service-kit';
import { auditEvents, chainHeads, checkpoints } from '../db/schema.js';
import type { AuditRow } from '../chain/audit-store.js';
import type { Checkpoint } from './checkpoint-fns.js';

/** A chain head that moved since its org's last checkpoint. */
export interface MovedHead {
  orgId: string;
  seq: number;
  hash: string;
}

/** SQL of checkpoints and exports. */
export class CheckpointStore {
  constructor(private readonly db: Database) {}

  /** Stores a checkpoint; when one of the same org and position exists already, returns that one. */
  async insert(c: Checkpoint): Promise<Checkpoint> {
    const [row] = await this.db.insert(checkpoints).values(c).onConflictDoNothing().returning();
    if (row) return row;
    const [existing] = await this.db
      .select()
      .from(checkpoints)
      .where(and(eq(checkpoints.orgId, c.orgId), eq(checkpoints.seq, c.seq)));
    if (!existing) throw new Error('checkpoint vanished');
    return existing;
  }

  /**
   * Heads (at least one record) ahead of their org's last checkpoint, of orgs after `afterOrg` in
   * id order, at most `limit`.
   */
  async movedHeads(afterOrg: string, limit: number): Promise<MovedHead[]> {
    const rows = await this.db
      .select({ orgId: chainHeads.orgId, seq: chainHeads.seq, hash: chainHeads.hash })
      .from(chainHeads)
      .where(
        and(
          gt(chainHeads.orgId, afterOrg),
          gt(chainHeads.seq, 0),
          sql`${chainHeads.seq} > coalesce((SELECT max(c.seq) FROM audit.checkpoints c WHERE c.org_id = ${chainHeads.orgId}), 0)`,
        ),
      )
      .orderBy(asc(chainHeads.orgId))
      .limit(limit);
    return rows;
  }

  /** One org's checkpoint, or undefined (another org's counts as absent). */
  async get(orgId: string, id: string): Promise<Checkpoint | undefined> {
    const [row] = await this.db
      .select()
      .from(checkpoints)
      .where(and(eq(checkpoints.orgId, orgId), eq(checkpoints.id, id)));
    return row;
  }

  /** An org's checkpoints, newest first. */
  async list(orgId: string, limit: number, offset: number): Promise<{ rows: Checkpoint[]; total: number }> {
    const where = eq(checkpoints.orgId, orgId);
    const [rows, [total]] = await Promise.all([
      this.db
        .select()
        .from(checkpoints)
        .where(where)
        .orderBy(desc(checkpoints.seq))
        .limit(limit)
        .offset(offset),
      this.db.select({ n: count() }).from(checkpoints).where(where),
    ]);
    return { rows, total: Number(total?.n ?? 0) };
  }

  /** The record at an org's position, if any. */
  async recordAt(orgId: string, seq: number): Promise<AuditRow | undefined> {
    const [row] = await this.db
      .select()
      .from(auditEvents)
      .where(and(eq(auditEvents.orgId, orgId), eq(auditEvents.seq, seq)));
    return row;
  }

  /** Records of an org from `from` to `upTo` in chain order, at most `limit`. */
  async page(orgId: string, from: number, upTo: number, limit: number): Promise<AuditRow[]> {
    return this.db
      .select()
      .from(auditEvents)
      .where(and(eq(auditEvents.orgId, orgId), gt(auditEvents.seq, from - 1), lte(auditEvents.seq, upTo)))
      .orderBy(asc(auditEvents.seq))
      .limit(limit);
  }
}
