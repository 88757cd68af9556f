import { Metadata } from '@grpc/grpc-js';
import type { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import { ExpiringLru, callUnary } from '@custos/service-kit';
import { policyGenerationKey } from '@custos/service-kit/redis-acl';

/** What an agent's live allow grants give its tokens: path patterns and the vaults they are on. */
export interface AgentGrants {
  scopes: string[];
  vaultIds: string[];
}

/**
 * What identity asks policy: the grants behind an agent's token claims. A policy service that
 * cannot answer fails the exchange (503): a token is never minted with guessed claims.
 */
export class PolicyClient {
  private readonly cache: ExpiringLru<AgentGrants & { generation: string }> | undefined;

  constructor(
    private readonly policy: PolicyServiceClient,
    /**
     * The agent-scopes cache: an agent's grants are reused only while the org's decision generation
     * (which policy bumps after every grant change, see vault-crypto's DecisionCache) is the one they
     * were fetched under, and for at most `ttlMs`. Without it every exchange asks policy.
     */
    private readonly scopesCache?: {
      redis: { get(key: string): Promise<string | null> };
      ttlMs: number;
      size: number;
      now?: () => number;
    },
  ) {
    this.cache =
      scopesCache && scopesCache.ttlMs > 0 && scopesCache.size > 0
        ? new ExpiringLru(scopesCache.size)
        : undefined;
  }

  /**
   * The grants of an agent of an org, from the cache when they were fetched under the org's current
   * decision generation; when Redis cannot say, policy is asked.
   */
  async agentGrants(agent: { id: string; orgId: string }): Promise<AgentGrants> {
    const c = this.scopesCache;
    if (!this.cache || !c) return this.ask(agent);
    const generation = await c.redis.get(policyGenerationKey(agent.orgId)).then(
      (g) => g ?? '0',
      () => undefined,
    );
    if (generation === undefined) return this.ask(agent);
    const key = `${agent.orgId}:${agent.id}`;
    const now = (c.now ?? Date.now)();
    const hit = this.cache.get(key, now);
    if (hit && hit.generation === generation) return { scopes: hit.scopes, vaultIds: hit.vaultIds };
    // Fetched after the generation was read: an answer that raced a change is stamped with the
    // generation from before it, so it is never reused.
    const grants = await this.ask(agent);
    this.cache.set(key, { ...grants, generation }, now + c.ttlMs);
    return grants;
  }

  private async ask(agent: { id: string; orgId: string }): Promise<AgentGrants> {
    // Identity asks for itself while it mints a token: its client forwards no user's token, and
    // policy answers this RPC to identity's certificate only.
    const r = await callUnary(
      this.policy,
      this.policy.getAgentScopes,
      { orgId: agent.orgId, agentId: agent.id },
      new Metadata(),
    );
    return { scopes: r.scopes, vaultIds: r.vaultIds };
  }
}
