import { Metadata } from '@grpc/grpc-js';
import type { BillingServiceClient } from '@custos/proto/custos/billing/v1/service';
import type { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import {
  ResourceLimitExceededError,
  type Transaction,
  callUnary,
  currentRequestContext,
  lockOrgResource,
  runWithRequestContext,
} from '@custos/service-kit';
import { type AgentAccess, type AgentSettings, agentAccess } from './agent-fns.js';
import type { AgentStore } from './agent-store.js';

/**
 * What identity asks its peers about agents: the org's cap on active agents (billing) and the
 * grants behind an agent's token claims (policy). A peer that cannot answer fails the request
 * (503): an agent is never created over its cap, nor a token minted with guessed claims.
 */
export class AgentPeers {
  constructor(
    private readonly billing: BillingServiceClient,
    private readonly policy: PolicyServiceClient,
  ) {}

  /**
   * Makes room for one more active agent in `tx`, or throws 403 `resource_limit_exceeded`: the
   * cap is read first, then counted under the org's agent lock so that parallel creates queue.
   */
  async reserveActiveAgent(
    store: AgentStore,
    tx: Transaction,
    orgId: string,
    maxAgents: number,
    plan: string,
  ) {
    if (maxAgents < 0) return;
    await lockOrgResource(tx, orgId, 'agents');
    if ((await store.countActive(orgId, tx)) >= maxAgents) {
      throw new ResourceLimitExceededError('agents', maxAgents, plan);
    }
  }

  /** The org's cap on active agents (negative: unlimited) and its plan. */
  async agentCap(orgId: string): Promise<{ maxAgents: number; plan: string }> {
    const r = await callUnary(this.billing, this.billing.getOrgLimits, { orgId }, new Metadata());
    return { maxAgents: Number(r.limits?.maxAgents ?? 0), plan: r.limits?.plan ?? 'unknown' };
  }

  /** The `scopes` and `vault_ids` an agent's next token carries. */
  async tokenAccess(agent: { id: string; orgId: string }, s: AgentSettings): Promise<AgentAccess> {
    // Identity asks for itself while it mints a token: a bearer header the client happened to send
    // on a public exchange (agent-token, router-key token) must not travel along and be judged.
    const ctx = currentRequestContext();
    const r = await runWithRequestContext(
      { requestId: ctx?.requestId ?? 'identity', ...(ctx?.clientIp ? { clientIp: ctx.clientIp } : {}) },
      () =>
        callUnary(
          this.policy,
          this.policy.getAgentScopes,
          { orgId: agent.orgId, agentId: agent.id },
          new Metadata(),
        ),
    );
    return agentAccess(s, r);
  }
}
