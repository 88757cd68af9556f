import { and, asc, desc, eq, getTableColumns, inArray, isNull, sql } from 'drizzle-orm';
import type { Database, Transaction } from '@custos/service-kit';
import { approvalVotes, approvals } from '../db/schema.js';
import type {
  ApprovalRecord,
  ApprovalStatus,
  ConsumeInput,
  CredentialType,
  Decision,
  NewApproval,
  Requirement,
  VoteRecord,
} from './approval-types.js';

type Row = typeof approvals.$inferSelect;
type VoteRow = typeof approvalVotes.$inferSelect;
type Db = Database | Transaction;

/** A requirement as stored (the HTTP shape, readable in the table). */
function requirementJson(r: Requirement): Record<string, unknown> {
  return {
    min_approvals: r.minApprovals,
    required_roles: r.requiredRoles,
    per_role_minimums: r.perRoleMinimums,
    require_credential_types: r.requireCredentialTypes,
    self_approval_allowed: r.selfApprovalAllowed,
  };
}

function requirementOfJson(j: unknown): Requirement | null {
  if (!j || typeof j !== 'object') return null;
  const o = j as Record<string, unknown>;
  return {
    minApprovals: Number(o['min_approvals'] ?? 1),
    requiredRoles: (o['required_roles'] as string[] | undefined) ?? [],
    perRoleMinimums: (o['per_role_minimums'] as Record<string, number> | undefined) ?? {},
    requireCredentialTypes: (o['require_credential_types'] as string[] | undefined) ?? [],
    selfApprovalAllowed: o['self_approval_allowed'] === true,
  };
}

function toVote(v: VoteRow): VoteRecord {
  return {
    userId: v.userId,
    role: v.role,
    decision: v.decision as Decision,
    credentialType: v.credentialType,
    reason: v.reason,
    createdAt: v.createdAt,
  };
}

function toRecord(r: Row, votes: VoteRecord[] = []): ApprovalRecord {
  return {
    id: r.id,
    orgId: r.orgId,
    agentId: r.agentId,
    userId: r.userId,
    action: r.action,
    targetType: r.targetType,
    targetId: r.targetId,
    summary: r.summary as ApprovalRecord['summary'],
    payload: r.payload as Record<string, unknown> | null,
    reason: r.reason,
    declaredRiskTier: r.declaredRiskTier,
    riskTier: r.riskTier,
    status: r.status as ApprovalStatus,
    kind: r.kind as ApprovalRecord['kind'],
    requirement: requirementOfJson(r.requirement),
    preview: r.preview as Record<string, unknown> | null,
    rule: r.rule as Record<string, unknown> | null,
    decisionReason: r.decisionReason,
    decidedBy: r.decidedBy,
    decidedAt: r.decidedAt,
    credentialType: r.credentialType,
    expiresAt: r.expiresAt,
    executedAt: r.executedAt,
    executedBy: r.executedBy,
    consumedAt: r.consumedAt,
    consumedBy: r.consumedBy,
    createdAt: r.createdAt,
    votes,
  };
}

/** Postgres' unique_violation. */
function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; cause?: { code?: string } };
  return e?.code === '23505' || e?.cause?.code === '23505';
}

/** The statuses an approval may still be used or decided in; the sweeper ends them when due. */
const OPEN_STATUSES: ApprovalStatus[] = ['pending', 'approved', 'executed'];

/**
 * The status an approval shows when read: `expired` once it is past `expires_at` on the
 * database's clock while still open and unused, even before the sweeper has written it.
 */
const shownStatus = sql<string>`case when ${approvals.status} in ('pending', 'approved', 'executed') and ${approvals.consumedAt} is null and ${approvals.expiresAt} <= now() then 'expired' else ${approvals.status} end`;

/** The columns of a read: the row, its status as shown. */
const readColumns = { ...getTableColumns(approvals), status: shownStatus };

/**
 * SQL of approvals and their votes. Every change of status is conditional on the status it leaves
 * (and on `expires_at > now()` where deciding or using), so concurrent callers cannot both win;
 * times that bound deciding and using are the database's clock.
 */
export class ApprovalStore {
  constructor(private readonly db: Database) {}

  /** Runs `fn` in one transaction. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  /** Inserts an approval; it expires `ttlSeconds` after now (the database's clock). */
  async insert(n: NewApproval, tx: Db = this.db): Promise<ApprovalRecord> {
    const [r] = await tx
      .insert(approvals)
      .values({
        orgId: n.orgId,
        agentId: n.agentId,
        userId: n.userId,
        action: n.action,
        targetType: n.targetType,
        targetId: n.targetId,
        summary: n.summary,
        payload: n.payload,
        reason: n.reason,
        declaredRiskTier: n.declaredRiskTier,
        riskTier: n.riskTier,
        kind: n.kind,
        requirement: n.requirement ? requirementJson(n.requirement) : null,
        preview: n.preview,
        rule: n.rule,
        expiresAt: sql`now() + make_interval(secs => ${n.ttlSeconds})`,
      })
      .returning();
    return toRecord(r!);
  }

  private async votesOf(ids: string[], tx: Db): Promise<Map<string, VoteRecord[]>> {
    const out = new Map<string, VoteRecord[]>();
    if (ids.length === 0) return out;
    const rows = await tx
      .select()
      .from(approvalVotes)
      .where(inArray(approvalVotes.approvalId, ids))
      .orderBy(asc(approvalVotes.createdAt), asc(approvalVotes.userId));
    for (const v of rows) {
      const list = out.get(v.approvalId) ?? [];
      list.push(toVote(v));
      out.set(v.approvalId, list);
    }
    return out;
  }

  private async withVotes(r: Row, tx: Db): Promise<ApprovalRecord> {
    return toRecord(r, r.kind === 'consensus' ? ((await this.votesOf([r.id], tx)).get(r.id) ?? []) : []);
  }

  /**
   * An approval of an org, with its votes, its status as shown (`expired` when due and not yet
   * swept); undefined when there is none.
   */
  async get(orgId: string, id: string, tx: Db = this.db): Promise<ApprovalRecord | undefined> {
    const [r] = await tx
      .select(readColumns)
      .from(approvals)
      .where(and(eq(approvals.id, id), eq(approvals.orgId, orgId)));
    return r ? this.withVotes(r, tx) : undefined;
  }

  /**
   * An approval of an org, locked (`FOR UPDATE`) until the transaction ends: the decision that
   * follows sees every vote committed before it and no other decision runs beside it.
   * `unexpired` is `expires_at > now()` on the database's clock, the one that bounds deciding.
   */
  async lock(
    orgId: string,
    id: string,
    tx: Transaction,
  ): Promise<{ approval: ApprovalRecord; unexpired: boolean } | undefined> {
    const [r] = await tx
      .select({ ...getTableColumns(approvals), unexpired: sql<boolean>`${approvals.expiresAt} > now()` })
      .from(approvals)
      .where(and(eq(approvals.id, id), eq(approvals.orgId, orgId)))
      .for('update');
    if (!r) return undefined;
    const { unexpired, ...row } = r;
    return { approval: await this.withVotes(row, tx), unexpired: unexpired === true };
  }

  /**
   * An org's approvals, pending first, then newest first; the status filtered on and shown is the
   * status as shown (an unswept approval past its expiry is `expired`).
   */
  async list(
    orgId: string,
    filter: { status?: ApprovalStatus; agentId?: string; limit: number },
  ): Promise<ApprovalRecord[]> {
    const rows = await this.db
      .select(readColumns)
      .from(approvals)
      .where(
        and(
          eq(approvals.orgId, orgId),
          filter.status ? sql`${shownStatus} = ${filter.status}` : undefined,
          filter.agentId ? eq(approvals.agentId, filter.agentId) : undefined,
        ),
      )
      .orderBy(sql`(${shownStatus} = 'pending') desc`, desc(approvals.createdAt), desc(approvals.id))
      .limit(filter.limit);
    const votes = await this.votesOf(
      rows.filter((r) => r.kind === 'consensus').map((r) => r.id),
      this.db,
    );
    return rows.map((r) => toRecord(r, votes.get(r.id) ?? []));
  }

  /**
   * Settles a pending approval (a single decision, or a consensus whose votes settled it):
   * conditional on `pending` and not expired; undefined when another decision came first.
   */
  async settle(
    id: string,
    d: {
      status: 'approved' | 'rejected';
      decidedBy: string;
      reason: string | null;
      credentialType: CredentialType;
    },
    tx: Db,
  ): Promise<ApprovalRecord | undefined> {
    const [r] = await tx
      .update(approvals)
      .set({
        status: d.status,
        decidedBy: d.decidedBy,
        decidedAt: sql`now()`,
        decisionReason: d.reason,
        credentialType: d.credentialType,
      })
      .where(and(eq(approvals.id, id), eq(approvals.status, 'pending'), sql`${approvals.expiresAt} > now()`))
      .returning();
    return r ? this.withVotes(r, tx) : undefined;
  }

  /** Records one human's vote; a second vote by the same human is false (the primary key). */
  async addVote(
    v: {
      approvalId: string;
      userId: string;
      role: string;
      decision: Decision;
      credentialType: string;
      reason: string | null;
    },
    tx: Transaction,
  ): Promise<boolean> {
    try {
      // A savepoint: the unique violation must not abort the caller's transaction.
      await tx.transaction(async (sp) => {
        await sp.insert(approvalVotes).values(v);
      });
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  /** The votes of one approval. */
  async votes(id: string, tx: Db = this.db): Promise<VoteRecord[]> {
    return (await this.votesOf([id], tx)).get(id) ?? [];
  }

  /** Executes an approved consensus approval: conditional on `approved` and not expired. */
  async execute(orgId: string, id: string, userId: string, tx: Db): Promise<ApprovalRecord | undefined> {
    const [r] = await tx
      .update(approvals)
      .set({ status: 'executed', executedAt: sql`now()`, executedBy: userId })
      .where(
        and(
          eq(approvals.id, id),
          eq(approvals.orgId, orgId),
          eq(approvals.kind, 'consensus'),
          eq(approvals.status, 'approved'),
          sql`${approvals.expiresAt} > now()`,
        ),
      )
      .returning();
    return r ? this.withVotes(r, tx) : undefined;
  }

  /**
   * Uses an approval once: one conditional UPDATE on everything that makes the use valid (the
   * org, agent, action and target it was raised for; approved when single, executed when
   * consensus; unused; not expired). Undefined when any of it does not hold.
   */
  async consume(c: ConsumeInput, tx: Db): Promise<ApprovalRecord | undefined> {
    const [r] = await tx
      .update(approvals)
      .set({ consumedAt: sql`now()`, consumedBy: `${c.targetType}:${c.targetId}` })
      .where(
        and(
          eq(approvals.id, c.approvalId),
          eq(approvals.orgId, c.orgId),
          eq(approvals.agentId, c.agentId),
          eq(approvals.action, c.action),
          eq(approvals.targetType, c.targetType),
          eq(approvals.targetId, c.targetId),
          sql`((${approvals.kind} = 'single' and ${approvals.status} = 'approved') or (${approvals.kind} = 'consensus' and ${approvals.status} = 'executed'))`,
          isNull(approvals.consumedAt),
          sql`${approvals.expiresAt} > now()`,
        ),
      )
      .returning();
    return r ? this.withVotes(r, tx) : undefined;
  }

  /**
   * Ends up to `batch` open, unused approvals past their expiry: the rows are taken with
   * `FOR UPDATE SKIP LOCKED` (another replica's sweep, or a decision in progress, keeps its rows)
   * and changed conditionally on their status.
   */
  async expireDue(
    batch: number,
    tx: Transaction,
  ): Promise<{ approval: ApprovalRecord; statusBefore: ApprovalStatus }[]> {
    const due = await tx
      .select({ id: approvals.id, status: approvals.status })
      .from(approvals)
      .where(
        and(
          inArray(approvals.status, OPEN_STATUSES),
          isNull(approvals.consumedAt),
          sql`${approvals.expiresAt} <= now()`,
        ),
      )
      .orderBy(asc(approvals.expiresAt))
      .limit(batch)
      .for('update', { skipLocked: true });
    if (due.length === 0) return [];
    const before = new Map(due.map((d) => [d.id, d.status as ApprovalStatus]));
    const rows = await tx
      .update(approvals)
      .set({ status: 'expired' })
      .where(
        and(
          inArray(approvals.id, [...before.keys()]),
          inArray(approvals.status, OPEN_STATUSES),
          isNull(approvals.consumedAt),
        ),
      )
      .returning();
    return rows.map((r) => ({ approval: toRecord(r), statusBefore: before.get(r.id)! }));
  }
}
