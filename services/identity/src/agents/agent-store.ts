import { and, asc, count, eq, isNull } from 'drizzle-orm';
import type { Database, Transaction } from '@custos/service-kit';
import { SCHEMA, agentKeys, agents } from '../db/schema.js';
import { settingsFromStored, settingsToStored } from './agent-settings-fns.js';
import type { Agent, AgentSettings } from './agent-types.js';

type Tx = Transaction | Database;
type AgentRow = typeof agents.$inferSelect;

/**
 * The part of a `pg` pool the hand-written hot queries use: named prepared statements, parsed once
 * per connection, instead of Drizzle building the SQL on every call.
 */
export interface SqlPool {
  query(q: { name: string; text: string; values: unknown[] }): Promise<{
    rows: Array<Record<string, unknown>>;
    rowCount: number | null;
  }>;
}

/** A live agent key together with its agent: what the agent-token exchange needs, in one round trip. */
export interface LiveKeyOfAgent {
  key: AgentKeyRow;
  agent: Agent;
}

// The key and its agent in one statement (agent_keys.agent_id references agents, so a live key
// always has its agent). Columns are listed, so a column added later does not change the row shape.
const LIVE_KEY_WITH_AGENT = {
  name: 'identity_live_agent_key_with_agent',
  text:
    `SELECT k.id AS key_id, k.secret_hash, a.id, a.org_id, a.name, a.description, a.is_active,` +
    ` a.created_by, a.created_at, a.updated_at, a.last_active_at, a.settings` +
    ` FROM "${SCHEMA}".agent_keys k JOIN "${SCHEMA}".agents a ON a.id = k.agent_id` +
    ` WHERE k.id = $1 AND k.revoked_at IS NULL`,
};

// Only ever moves last_active_at forward (two replicas, or a write that arrives late, cannot move
// it back); updated_at is left alone: it says when the agent was changed, not when it was used.
const TOUCH_LAST_ACTIVE = {
  name: 'identity_touch_agent_last_active',
  text:
    `UPDATE "${SCHEMA}".agents SET last_active_at = $2` +
    ` WHERE id = $1 AND (last_active_at IS NULL OR last_active_at < $2)`,
};

/** A live agent key: its lookup id, its agent and the hash of its secret. */
export interface AgentKeyRow {
  id: string;
  agentId: string;
  secretHash: string;
}

function agentOf(row: AgentRow): Agent {
  return {
    id: row.id,
    orgId: row.orgId,
    name: row.name,
    description: row.description,
    isActive: row.isActive,
    createdBy: row.createdBy,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
    lastActiveAt: row.lastActiveAt,
    settings: settingsFromStored(row.settings),
  };
}

/** SQL of agents and their API keys. Every method takes an optional transaction. */
export class AgentStore {
  constructor(
    private readonly db: Database,
    private readonly pool: SqlPool,
  ) {}

  /** Runs `fn` in one transaction. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  /** Inserts an agent. */
  async insert(
    row: { orgId: string; name: string; description: string; settings: AgentSettings; createdBy: string },
    tx: Tx = this.db,
  ): Promise<Agent> {
    const [created] = await tx
      .insert(agents)
      .values({ ...row, settings: settingsToStored(row.settings) })
      .returning();
    return agentOf(created!);
  }

  /** An agent of an org (undefined when it belongs to another org). */
  async findInOrg(id: string, orgId: string, tx: Tx = this.db): Promise<Agent | undefined> {
    const rows = await tx
      .select()
      .from(agents)
      .where(and(eq(agents.id, id), eq(agents.orgId, orgId)));
    return rows[0] && agentOf(rows[0]);
  }

  /** An agent by id. */
  async findById(id: string, tx: Tx = this.db): Promise<Agent | undefined> {
    const rows = await tx.select().from(agents).where(eq(agents.id, id));
    return rows[0] && agentOf(rows[0]);
  }

  /** An agent by id, its row locked until the transaction `tx` ends (an update that compares). */
  async findByIdForUpdate(id: string, tx: Tx): Promise<Agent | undefined> {
    // NO KEY UPDATE, not UPDATE: inserting a key (agent_keys.agent_id's foreign key takes KEY SHARE
    // on this row) must not wait for it, or a key rotation holding agent_keys would deadlock with it.
    const rows = await tx.select().from(agents).where(eq(agents.id, id)).for('no key update');
    return rows[0] && agentOf(rows[0]);
  }

  /** The agents of an org, oldest first. */
  async listInOrg(orgId: string, tx: Tx = this.db): Promise<Agent[]> {
    const rows = await tx.select().from(agents).where(eq(agents.orgId, orgId)).orderBy(asc(agents.createdAt));
    return rows.map(agentOf);
  }

  /** How many active agents the org has (under the caller's cap lock, in its transaction). */
  async countActive(orgId: string, tx: Tx = this.db): Promise<number> {
    const [row] = await tx
      .select({ n: count() })
      .from(agents)
      .where(and(eq(agents.orgId, orgId), eq(agents.isActive, true)));
    return row?.n ?? 0;
  }

  /** Writes changed columns. */
  async update(
    id: string,
    change: Partial<Pick<Agent, 'name' | 'description' | 'isActive' | 'settings' | 'lastActiveAt'>>,
    tx: Tx = this.db,
  ): Promise<Agent> {
    const { settings, ...columns } = change;
    const [row] = await tx
      .update(agents)
      .set({
        ...columns,
        ...(settings ? { settings: settingsToStored(settings) } : {}),
        updatedAt: new Date(),
      })
      .where(eq(agents.id, id))
      .returning();
    return agentOf(row!);
  }

  /** Stores a key (only its hash). */
  async insertKey(row: AgentKeyRow, tx: Tx = this.db): Promise<void> {
    await tx.insert(agentKeys).values(row);
  }

  /** Revokes every live key of an agent; returns the revoked key ids. */
  async revokeKeys(agentId: string, tx: Tx = this.db): Promise<string[]> {
    const rows = await tx
      .update(agentKeys)
      .set({ revokedAt: new Date() })
      .where(and(eq(agentKeys.agentId, agentId), isNull(agentKeys.revokedAt)))
      .returning({ id: agentKeys.id });
    return rows.map((r) => r.id);
  }

  /** A live (unrevoked) key by its id part. */
  async findLiveKey(id: string, tx: Tx = this.db): Promise<AgentKeyRow | undefined> {
    const rows = await tx
      .select({ id: agentKeys.id, agentId: agentKeys.agentId, secretHash: agentKeys.secretHash })
      .from(agentKeys)
      .where(and(eq(agentKeys.id, id), isNull(agentKeys.revokedAt)));
    return rows[0];
  }

  /**
   * A live (unrevoked) key by its id part, with its agent, in one round trip (a prepared statement
   * on the pool; the exchange runs it outside any transaction).
   */
  async findLiveKeyWithAgent(id: string): Promise<LiveKeyOfAgent | undefined> {
    const { rows } = await this.pool.query({ ...LIVE_KEY_WITH_AGENT, values: [id] });
    const r = rows[0];
    if (!r) return undefined;
    return {
      key: { id: r['key_id'] as string, agentId: r['id'] as string, secretHash: r['secret_hash'] as string },
      agent: {
        id: r['id'] as string,
        orgId: r['org_id'] as string,
        name: r['name'] as string,
        description: r['description'] as string,
        isActive: r['is_active'] as boolean,
        createdBy: r['created_by'] as string,
        createdAt: r['created_at'] as Date,
        updatedAt: r['updated_at'] as Date,
        lastActiveAt: (r['last_active_at'] as Date | null) ?? null,
        settings: settingsFromStored(r['settings'] as Record<string, unknown>),
      },
    };
  }

  /** Moves an agent's `last_active_at` forward to `at` (never back); only that column is written. */
  async touchLastActive(id: string, at: Date): Promise<void> {
    await this.pool.query({ ...TOUCH_LAST_ACTIVE, values: [id, at] });
  }
}
