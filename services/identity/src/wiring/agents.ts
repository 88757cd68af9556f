import type { Database } from '@custos/service-kit';
import { AgentExchangeService } from '../agents/agent-exchange-service.js';
import { AgentService } from '../agents/agent-service.js';
import { AgentStore } from '../agents/agent-store.js';
import { RouterKeyService } from '../agents/router-key-service.js';
import { RouterKeyStore } from '../agents/router-key-store.js';
import type { FederationKey } from '../federation/federation-fns.js';
import { FederationService } from '../federation/federation-service.js';
import type { BillingClient } from '../peers/billing-client.js';
import type { PolicyClient } from '../peers/policy-client.js';
import type { Tokens } from './tokens.js';

/**
 * Builds the rules about agents: registration and settings, router keys, the exchange of either
 * key for an agent token, and federated tokens for relying parties outside Custos.
 */
export function buildAgents(deps: {
  db: Database;
  tokens: Tokens;
  billing: BillingClient;
  policy: PolicyClient;
  federationKey: FederationKey | undefined;
}) {
  const { db, tokens } = deps;
  const agentStore = new AgentStore(db);
  const routerKeyStore = new RouterKeyStore(db);
  return {
    agents: new AgentService(agentStore, tokens.revocations, deps.billing),
    routerKeys: new RouterKeyService(routerKeyStore, agentStore, tokens.revocations),
    exchange: new AgentExchangeService(agentStore, routerKeyStore, tokens.issuer, deps.policy),
    federation: new FederationService(
      agentStore,
      tokens.verifier,
      deps.federationKey,
      tokens.settings.issuers[0]!,
      deps.policy,
    ),
  };
}
