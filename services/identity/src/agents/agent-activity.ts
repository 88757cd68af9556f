import { type Logger, describeError } from '@custos/service-kit';
import type { AgentStore } from './agent-store.js';

/** How often one replica writes an agent's `last_active_at` at most (docs/decisions.md). */
export const AGENT_ACTIVITY_WRITE_INTERVAL_MS = 60_000;
/** Agents whose last write this replica remembers at most; the oldest are forgotten first. */
export const AGENT_ACTIVITY_MAX_TRACKED = 10_000;

/**
 * Keeps agents' `last_active_at` (shown by the agent API) without a write per token exchange: on
 * this replica, an agent's first exchange writes it, and later ones write it again only once
 * `intervalMs` has passed since that write. So the column lags the agent's real last exchange by
 * less than `intervalMs` per replica, and a burst of exchanges by one agent costs one UPDATE
 * instead of one row lock each (which serialized them: every exchange waited for the previous
 * one's commit). `last_active_at` is not an audit record — the `auth.login` records are.
 */
export class AgentActivity {
  // agent id → when this replica last wrote it (ms); Map order is write order, oldest first.
  private readonly written = new Map<string, number>();

  constructor(
    private readonly store: Pick<AgentStore, 'touchLastActive'>,
    private readonly logger: Pick<Logger, 'warn'>,
    private readonly intervalMs = AGENT_ACTIVITY_WRITE_INTERVAL_MS,
    private readonly maxTracked = AGENT_ACTIVITY_MAX_TRACKED,
  ) {}

  /**
   * Notes an exchange by the agent; resolves once the write it caused (if one was due) is done.
   * Never rejects: a failed write is logged and retried by the agent's next exchange.
   */
  async seen(agentId: string, now = Date.now()): Promise<void> {
    const last = this.written.get(agentId);
    if (last !== undefined && now - last < this.intervalMs) return;
    // Claimed before the write, so the exchanges that arrive meanwhile do not write too.
    this.written.delete(agentId);
    this.written.set(agentId, now);
    this.forgetOldest();
    try {
      await this.store.touchLastActive(agentId, new Date(now));
    } catch (err) {
      if (this.written.get(agentId) === now) this.written.delete(agentId);
      this.logger.warn({ err: describeError(err), agentId }, 'agent last_active_at not written');
    }
  }

  private forgetOldest(): void {
    for (const id of this.written.keys()) {
      if (this.written.size <= this.maxTracked) return;
      this.written.delete(id);
    }
  }
}
