import { Metadata } from '@grpc/grpc-js';
import type { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import { callUnary, currentRequestContext, runWithRequestContext } from '@custos/service-kit';

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
  constructor(private readonly policy: PolicyServiceClient) {}

  /** The grants of an agent of an org. */
  agentGrants(agent: { id: string; orgId: string }): Promise<AgentGrants> {
    // Identity asks for itself while it mints a token: a bearer header the client happened to send
    // on a public exchange (agent-token, federated token) must not travel along and be judged.
    const ctx = currentRequestContext();
    return runWithRequestContext(
      { requestId: ctx?.requestId ?? 'identity', ...(ctx?.clientIp ? { clientIp: ctx.clientIp } : {}) },
      async () => {
        const r = await callUnary(
          this.policy,
          this.policy.getAgentScopes,
          { orgId: agent.orgId, agentId: agent.id },
          new Metadata(),
        );
        return { scopes: r.scopes, vaultIds: r.vaultIds };
      },
    );
  }
}
