import type { Principal, UserPrincipal } from '@custos/auth';
import { InvalidArgumentError, NotFoundError, PermissionDeniedError, isUuid } from '@custos/service-kit';
import type { AgentRow, AgentStore } from './agent-store.js';

/** The caller as an org owner or admin, who alone manage agents and their keys (403 otherwise). */
export function agentManager(p: Principal, what = 'agents'): UserPrincipal {
  if (p.kind !== 'user') throw new PermissionDeniedError(`agents cannot manage ${what}`);
  if (p.role !== 'owner' && p.role !== 'admin') {
    throw new PermissionDeniedError(`only an org owner or admin can manage ${what}`);
  }
  return p;
}

/** The agent when it is in the caller's org: 400 for a malformed id, 404 otherwise (other orgs learn nothing). */
export async function agentInOrg(store: AgentStore, p: Principal, agentId: string): Promise<AgentRow> {
  if (!isUuid(agentId)) throw new InvalidArgumentError('agent_id', 'agent_id must be a UUID');
  const row = await store.findInOrg(agentId.toLowerCase(), p.orgId);
  if (!row) throw new NotFoundError('agent', agentId);
  return row;
}
