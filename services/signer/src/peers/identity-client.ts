import { Metadata } from '@grpc/grpc-js';
import type { Agent } from '@custos/proto/custos/identity/v1/agents';
import type { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import { callUnary } from '@custos/service-kit';

/**
 * identity's IdentityService as signer uses it: whether an agent is in the org of a caller whose
 * token signer verified itself. The call carries no user token (identity believes one from the
 * gateway only); identity admits it by signer's certificate and answers for the org signer names.
 */
export class IdentityClient {
  constructor(private readonly client: IdentityServiceClient) {}

  /** Resolves when the agent is in the org; identity's NOT_FOUND (404 `agent`) or 400 otherwise. */
  async requireAgentInOrg(orgId: string, agentId: string): Promise<void> {
    await callUnary(this.client, this.client.getOrgAgent, { orgId, agentId }, new Metadata());
  }

  /** The agent with its settings, when it is in the org (NOT_FOUND otherwise). */
  async agentInOrg(orgId: string, agentId: string): Promise<Agent> {
    const r = await callUnary(this.client, this.client.getOrgAgent, { orgId, agentId }, new Metadata());
    if (!r.agent) throw new Error('identity answered GetOrgAgent without an agent');
    return r.agent;
  }
}
