import { Metadata } from '@grpc/grpc-js';
import type { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import { callUnary } from '@custos/service-kit';

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
  async agentGrants(agent: { id: string; orgId: string }): Promise<AgentGrants> {
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
