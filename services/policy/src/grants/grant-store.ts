import { and, asc, count, eq, isNotNull, sql } from 'drizzle-orm';
import type pg from 'pg';
import type { StoredRule } from '@custos/approval-rules';
import type { Database, Transaction } from '@custos/service-kit';
import { SCHEMA, grants } from '../db/schema.js';
import { conditionsJson, conditionsOfJson } from './condition-fns.js';
import type {
  Effect,
  GrantChange,
  GrantInput,
  GrantRecord,
  Permission,
  PrincipalType,
} from './grant-types.js';

type Row = typeof grants.$inferSelect;
type Db = Database | Transaction;

function toRecord(r: Row): GrantRecord {
  return {
    id: r.id,
    orgId: r.orgId,
    vaultId: r.vaultId,
    secretPathPattern: r.secretPathPattern,
    principalType: r.principalType as PrincipalType,
    principalId: r.principalId,
    permissions: r.permissions as Permission[],
    conditions: conditionsOfJson(r.conditions),
    effect: r.effect as Effect,
    priority: r.priority,
    expiresAt: r.expiresAt,
    consensusTrigger: (r.consensusTrigger as StoredRule | null) ?? null,
    createdBy: r.createdBy,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  };
}

// The two hot reads (Decide on a cache miss, GetAgentScopes on every agent-token exchange) as named
// prepared statements: parsed and planned once per connection, no query building per call.
const COLUMNS = `id, org_id AS "orgId", vault_id AS "vaultId", secret_path_pattern AS "secretPathPattern",
  principal_type AS "principalType", principal_id AS "principalId", permissions, conditions, effect,
  priority, expires_at AS "expiresAt", consensus_trigger AS "consensusTrigger", created_by AS "createdBy", created_at AS "createdAt",
  updated_at AS "updatedAt"`;
const FOR_DECISION = `SELECT ${COLUMNS} FROM "${SCHEMA}".grants
  WHERE org_id = $1 AND vault_id = $2 AND principal_type = $3 AND principal_id = $4
    AND (expires_at IS NULL OR expires_at > $5)`;
const LIVE_ALLOWS_OF_AGENT = `SELECT ${COLUMNS} FROM "${SCHEMA}".grants
  WHERE principal_type = 'agent' AND principal_id = $2 AND org_id = $1 AND effect = 'allow'
    AND (expires_at IS NULL OR expires_at > $3)
  ORDER BY created_at, id`;
const TRIGGERS_OF_AGENT = `SELECT ${COLUMNS} FROM "${SCHEMA}".grants
  WHERE principal_type = 'agent' AND principal_id = $2 AND org_id = $1 AND consensus_trigger IS NOT NULL
  ORDER BY created_at, id`;

/** SQL of grants. */
export class GrantStore {
  constructor(
    private readonly db: Database,
    /** The same pool, for the hot reads' prepared statements. */
    private readonly pool: pg.Pool,
  ) {}

  /** Runs `fn` in one transaction. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  /** Inserts a grant. */
  async insert(
    row: GrantInput & { orgId: string; vaultId: string; createdBy: string },
    tx: Db = this.db,
  ): Promise<GrantRecord> {
    const [r] = await tx
      .insert(grants)
      .values({ ...row, conditions: conditionsJson(row.conditions) })
      .returning();
    return toRecord(r!);
  }

  // Every query names the org as well as the vault: the vault's facts come from the caller (the
  // gateway), so a vault id of another org must never match a grant.

  /** A grant of a vault of an org by id. */
  async get(orgId: string, vaultId: string, id: string, tx: Db = this.db): Promise<GrantRecord | undefined> {
    const [r] = await tx
      .select()
      .from(grants)
      .where(and(eq(grants.id, id), eq(grants.orgId, orgId), eq(grants.vaultId, vaultId)));
    return r ? toRecord(r) : undefined;
  }

  /** Every grant of a vault, expired ones included, oldest first. */
  async listByVault(orgId: string, vaultId: string): Promise<GrantRecord[]> {
    const rows = await this.db
      .select()
      .from(grants)
      .where(and(eq(grants.orgId, orgId), eq(grants.vaultId, vaultId)))
      .orderBy(asc(grants.createdAt), asc(grants.id));
    return rows.map(toRecord);
  }

  /** Changes the given fields of a grant of a vault; undefined when there is no such grant. */
  async update(
    orgId: string,
    vaultId: string,
    id: string,
    change: GrantChange,
    tx: Db = this.db,
  ): Promise<GrantRecord | undefined> {
    const [r] = await tx
      .update(grants)
      .set({
        ...change,
        ...(change.conditions ? { conditions: conditionsJson(change.conditions) } : {}),
        updatedAt: new Date(),
      })
      .where(and(eq(grants.id, id), eq(grants.orgId, orgId), eq(grants.vaultId, vaultId)))
      .returning();
    return r ? toRecord(r) : undefined;
  }

  /** Deletes a grant of a vault and returns it; undefined when there was none. */
  async delete(
    orgId: string,
    vaultId: string,
    id: string,
    tx: Db = this.db,
  ): Promise<GrantRecord | undefined> {
    const [r] = await tx
      .delete(grants)
      .where(and(eq(grants.id, id), eq(grants.orgId, orgId), eq(grants.vaultId, vaultId)))
      .returning();
    return r ? toRecord(r) : undefined;
  }

  /** The live grants of one principal on one vault: the one indexed read behind a decision. */
  async forDecision(
    orgId: string,
    vaultId: string,
    type: PrincipalType,
    principalId: string,
    now: Date,
  ): Promise<GrantRecord[]> {
    const r = await this.pool.query<Row>({
      name: 'policy_grants_for_decision',
      text: FOR_DECISION,
      values: [orgId, vaultId, type, principalId, now],
    });
    return r.rows.map(toRecord);
  }

  /**
   * How many of an agent's grants carry a consensus trigger, after taking a transaction lock on the
   * agent (held to the transaction's end, so concurrent trigger changes of one agent serialize).
   */
  async countTriggers(tx: Transaction, orgId: string, agentId: string): Promise<number> {
    await tx.execute(sql`SELECT pg_advisory_xact_lock(hashtext(${`policy:triggers:${agentId}`}))`);
    const [r] = await tx
      .select({ n: count() })
      .from(grants)
      .where(
        and(
          eq(grants.orgId, orgId),
          eq(grants.principalType, 'agent'),
          eq(grants.principalId, agentId),
          isNotNull(grants.consensusTrigger),
        ),
      );
    return Number(r?.n ?? 0);
  }

  /**
   * The grants of an agent of an org that carry a consensus trigger, whatever their effect or
   * expiry, oldest first: read on every transaction and sign intent of the agent.
   */
  async triggersOfAgent(orgId: string, agentId: string): Promise<GrantRecord[]> {
    const r = await this.pool.query<Row>({
      name: 'policy_triggers_of_agent',
      text: TRIGGERS_OF_AGENT,
      values: [orgId, agentId],
    });
    return r.rows.map(toRecord);
  }

  /** The live allow grants of an agent of an org, oldest first. */
  async liveAllowsOfAgent(orgId: string, agentId: string, now: Date): Promise<GrantRecord[]> {
    const r = await this.pool.query<Row>({
      name: 'policy_live_allows_of_agent',
      text: LIVE_ALLOWS_OF_AGENT,
      values: [orgId, agentId, now],
    });
    return r.rows.map(toRecord);
  }
}
