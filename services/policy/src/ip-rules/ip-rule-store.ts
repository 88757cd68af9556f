import { and, asc, count, eq, sql } from 'drizzle-orm';
import type { Database, Transaction } from '@custos/service-kit';
import { ipRules } from '../db/schema.js';
import type { IpRuleInput, IpRuleRecord, RuleType } from './ip-rule-types.js';

type Row = typeof ipRules.$inferSelect;
type Db = Database | Transaction;

function toRecord(r: Row): IpRuleRecord {
  return {
    id: r.id,
    orgId: r.orgId,
    cidr: r.cidr,
    ruleType: r.ruleType as RuleType,
    description: r.description,
    createdBy: r.createdBy,
    createdByType: r.createdByType as 'user' | 'agent',
    createdAt: r.createdAt,
  };
}

/** SQL of IP rules. */
export class IpRuleStore {
  constructor(private readonly db: Database) {}

  /** Runs `fn` in one transaction. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  /** Serialises rule changes of one org until the transaction ends (so a cap cannot be overshot). */
  async lockOrg(orgId: string, tx: Transaction): Promise<void> {
    await tx.execute(sql`SELECT pg_advisory_xact_lock(hashtextextended(${`policy.ip_rules:${orgId}`}, 0))`);
  }

  /** How many rules the org has. */
  async countByOrg(orgId: string, tx: Db = this.db): Promise<number> {
    const [r] = await tx.select({ n: count() }).from(ipRules).where(eq(ipRules.orgId, orgId));
    return r?.n ?? 0;
  }

  /** Inserts a rule; undefined when the org already has this network with this type. */
  async insert(
    row: IpRuleInput & { orgId: string; createdBy: string; createdByType: 'user' | 'agent' },
    tx: Db = this.db,
  ): Promise<IpRuleRecord | undefined> {
    const [r] = await tx.insert(ipRules).values(row).onConflictDoNothing().returning();
    return r ? toRecord(r) : undefined;
  }

  /** Every rule of an org, oldest first. */
  async listByOrg(orgId: string, tx: Db = this.db): Promise<IpRuleRecord[]> {
    const rows = await tx
      .select()
      .from(ipRules)
      .where(eq(ipRules.orgId, orgId))
      .orderBy(asc(ipRules.createdAt), asc(ipRules.id));
    return rows.map(toRecord);
  }

  /** Deletes a rule of an org and returns it; undefined when there was none. */
  async delete(orgId: string, id: string, tx: Db = this.db): Promise<IpRuleRecord | undefined> {
    const [r] = await tx
      .delete(ipRules)
      .where(and(eq(ipRules.id, id), eq(ipRules.orgId, orgId)))
      .returning();
    return r ? toRecord(r) : undefined;
  }
}
