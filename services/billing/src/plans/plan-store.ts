import { eq, sql } from 'drizzle-orm';
import type { Database } from '@custos/service-kit';
import { orgPlans } from '../db/schema.js';
import { isPlan } from './plan-fns.js';
import type { Plan } from './plan-types.js';

/** SQL of org plan assignments. */
export class PlanStore {
  constructor(private readonly db: Database) {}

  /** The plan assigned to an org, if one was. */
  async planOf(orgId: string): Promise<Plan | undefined> {
    const [row] = await this.db
      .select({ plan: orgPlans.plan })
      .from(orgPlans)
      .where(eq(orgPlans.orgId, orgId));
    return row && isPlan(row.plan) ? row.plan : undefined;
  }

  /** Assigns a plan to an org (insert or replace). */
  async assign(orgId: string, plan: Plan, assignedBy: string): Promise<void> {
    await this.db
      .insert(orgPlans)
      .values({ orgId, plan, assignedBy })
      .onConflictDoUpdate({
        target: orgPlans.orgId,
        set: { plan, assignedBy, updatedAt: sql`now()` },
      });
  }
}
