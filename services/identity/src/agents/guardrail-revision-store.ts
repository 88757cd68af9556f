import { and, desc, eq } from 'drizzle-orm';
import type { Database, Transaction } from '@custos/service-kit';
import { guardrailRevisions } from '../db/schema.js';
import type { GuardrailChange } from './guardrail-change-fns.js';

type Tx = Transaction | Database;

/** One applied edit of an agent's guardrail fields. */
export interface GuardrailRevision {
  id: string;
  orgId: string;
  agentId: string;
  actorId: string;
  change: GuardrailChange;
  before: Record<string, unknown>;
  after: Record<string, unknown>;
  approvalId: string | null;
  createdAt: Date;
}

/** SQL of guardrail revisions. */
export class GuardrailRevisionStore {
  constructor(private readonly db: Database) {}

  /** Writes a revision (in the edit's transaction). */
  async insert(row: Omit<GuardrailRevision, 'id' | 'createdAt'>, tx: Tx): Promise<GuardrailRevision> {
    const [r] = await tx.insert(guardrailRevisions).values(row).returning();
    return { ...r!, change: r!.change as GuardrailChange };
  }

  /** The org's revisions (of one agent when `agentId` is set), newest first. */
  async list(orgId: string, filter: { agentId?: string; limit: number }): Promise<GuardrailRevision[]> {
    const rows = await this.db
      .select()
      .from(guardrailRevisions)
      .where(
        and(
          eq(guardrailRevisions.orgId, orgId),
          ...(filter.agentId ? [eq(guardrailRevisions.agentId, filter.agentId)] : []),
        ),
      )
      .orderBy(desc(guardrailRevisions.createdAt), desc(guardrailRevisions.id))
      .limit(filter.limit);
    return rows.map((r) => ({ ...r, change: r.change as GuardrailChange }));
  }
}
