import { and, asc, count, eq, isNull } from 'drizzle-orm';
import type { Database, Transaction } from '@custos/service-kit';
import { agentKeys, agents } from '../db/schema.js';
import { settingsFromStored, settingsToStored } from './agent-settings-fns.js';
import type { Agent, AgentSettings } from './agent-types.js';

type Tx = Transaction | Database;
type AgentRow = typeof agents.$inferSelect;

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
  constructor(private readonly db: Database) {}

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
}
