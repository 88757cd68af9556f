import type { OutboxGroupCommit } from '@custos/events';
import type { Database, Logger } from '@custos/service-kit';
import { AgentActivity } from '../agents/agent-activity.js';
import { AgentExchangeService } from '../agents/agent-exchange-service.js';
import { AgentService } from '../agents/agent-service.js';
import { AgentStore, type SqlPool } from '../agents/agent-store.js';
import { GuardrailRevisionStore } from '../agents/guardrail-revision-store.js';
import { AdminStore } from '../orgs/admin-store.js';
import { RouterKeyService } from '../agents/router-key-service.js';
import { RouterKeyStore } from '../agents/router-key-store.js';
import type { FederationKey } from '../federation/federation-fns.js';
import { FederationService } from '../federation/federation-service.js';
import type { BillingClient } from '../peers/billing-client.js';
import type { PolicyClient } from '../peers/policy-client.js';
import type { Tokens } from './tokens.js';

import type { StepUpChecker } from '../mfa/mfa-types.js';
/**
 * Builds the rules about agents: registration and settings, router keys, the exchange of either
 * key for an agent token, and federated tokens for relying parties outside Custos.
 */
export function buildAgents(deps: {
  db: Database;
  /** The pool under `db`, for the exchange's prepared statements. */
  pool: SqlPool;
  /** Group commit of identity's outbox: the exchange's `auth.login` records. */
  commits: Pick<OutboxGroupCommit, 'audit'>;
  logger: Logger;
  tokens: Tokens;
  billing: BillingClient;
  policy: PolicyClient;
  federationKey: FederationKey | undefined;
  /** Step-up checks (identity's re-auth rules): agent key rotation and router key creation need one. */
  stepUp: StepUpChecker;
}) {
  const { db, tokens } = deps;
  const agentStore = new AgentStore(db, deps.pool);
  const routerKeyStore = new RouterKeyStore(db);
  const adminStore = new AdminStore(db);
  return {
    agents: new AgentService(agentStore, tokens.revocations, deps.billing, deps.stepUp, {
      revisions: new GuardrailRevisionStore(db),
      changesRequireApproval: () => changesRequireApproval(adminStore),
    }),
    routerKeys: new RouterKeyService(routerKeyStore, agentStore, tokens.revocations, deps.stepUp),
    exchange: new AgentExchangeService(
      agentStore,
      routerKeyStore,
      tokens.issuer,
      deps.policy,
      deps.commits,
      new AgentActivity(agentStore, deps.logger),
      deps.logger,
      tokens.wrongSecrets,
    ),
    federation: new FederationService(
      agentStore,
      tokens.verifier,
      deps.federationKey,
      tokens.settings.issuers[0]!,
      deps.policy,
    ),
  };
}

/**
 * Whether widening guardrail edits wait for an approval: the setting
 * `guardrail_changes_require_approval` (`/v1/admin/settings`) is "true". Read on every guardrail
 * edit, so a change of the setting applies to the next edit.
 */
export async function changesRequireApproval(admin: Pick<AdminStore, 'getSetting'>): Promise<boolean> {
  return (await admin.getSetting('guardrail_changes_require_approval'))?.value === 'true';
}
