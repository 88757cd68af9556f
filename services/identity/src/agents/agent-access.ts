import type { Principal } from '@custos/auth';
import { InvalidArgumentError, NotFoundError, isUuid } from '@custos/service-kit';
import type { AgentStore } from './agent-store.js';
import type { Agent } from './agent-types.js';

/** The agent when it is in the caller's org: 400 for a malformed id, 404 otherwise (other orgs learn nothing). */
export async function agentInOrg(
  store: Pick<AgentStore, 'findInOrg'>,
  p: Pick<Principal, 'orgId'>,
  agentId: string,
): Promise<Agent> {
  if (!isUuid(agentId)) throw new InvalidArgumentError('agent_id', 'agent_id must be a UUID');
  const agent = await store.findInOrg(agentId.toLowerCase(), p.orgId);
  if (!agent) throw new NotFoundError('agent', agentId);
  return agent;
}
