import type { AgentPrincipal, Principal } from '@custos/auth';
import { auditOf } from '@custos/events';
import type { Agent, ApprovalRule } from '@custos/proto/custos/identity/v1/agents';
import {
  CustosError,
  type Database,
  type Logger,
  NotFoundError,
  PermissionDeniedError,
  isUuid,
} from '@custos/service-kit';
import { failClosed, writeSignerAudit } from '../audit/signer-audit.js';
import { keyNameOf } from '../chains/chain-fns.js';
import type { ChainService } from '../chains/chain-service.js';
import type { ChainRecord } from '../chains/chain-types.js';
import { type ChainAdapter, type ChainAdapters, adapterFor } from '../keys/chain-adapter.js';
import { agentIdOf } from '../keys/key-fns.js';
import type { KeyLoader } from '../keys/key-loader.js';
import type { KeyStore } from '../keys/key-store.js';
import type { SigningKeyRecord } from '../keys/key-types.js';
import type { IdentityClient } from '../peers/identity-client.js';
import type { PolicyClient } from '../peers/policy-client.js';

/** Everything a signing request of an agent stands on, checked: who, which chain, which key, which settings. */
export interface IntentScope {
  agent: AgentPrincipal;
  /**
   * The agent's record and settings as identity holds them now (not as the token was minted), its
   * action_approval_policy followed by the consensus triggers of its vault policies.
   */
  settings: Agent;
  chain: ChainRecord;
  key: SigningKeyRecord;
  adapter: ChainAdapter;
}

/** Problem types of the Intents API's refusals (SPEC §7), named once. */
export const INTENT_REFUSALS = {
  notAgent: 'intents_agent_only',
  otherAgent: 'intents_other_agent',
  intentsDisabled: 'intents_api_disabled',
  agentInactive: 'agent_inactive',
  clientTss: 'client_tss_refused',
  messageSigningDisabled: 'message_signing_disabled',
  rawSigningDisabled: 'raw_signing_disabled',
} as const;

/**
 * The agent with its vault policies' consensus triggers appended to its action_approval_policy
 * (DECISIONS.md: a policy's `consensus_trigger` is the same kind of rule for that agent), so the
 * approval gate matches them as it matches the agent's own rules.
 */
export function withTriggers(agent: Agent, triggers: readonly ApprovalRule[]): Agent {
  if (triggers.length === 0) return agent;
  const own = agent.actionApprovalPolicy?.rules ?? [];
  return { ...agent, actionApprovalPolicy: { rules: [...own, ...triggers] } };
}

/**
 * The checks every transaction and sign intent passes before anything is built or signed, in one
 * place: the caller is an agent acting for itself (SPEC §4.4), its token carries
 * `intents_api_enabled` (403 otherwise), the agent is still active in identity, the chain is known
 * and enabled (400 naming the field), and the agent has an active key for the chain's family whose
 * custody the server path may use (`client_tss` is refused, SPEC §2.8). `audited` records every
 * refusal (`<action>.refused` with a `reason`) before it is answered.
 */
export class IntentContext {
  constructor(
    private readonly deps: {
      db: Database;
      chains: Pick<ChainService, 'resolve'>;
      keys: Pick<KeyStore, 'active'>;
      adapters: ChainAdapters;
      identity: Pick<IdentityClient, 'agentInOrg'>;
      policy: Pick<PolicyClient, 'approvalRulesOf'>;
      loader: KeyLoader;
      logger: Logger;
    },
  ) {}

  /** The key loader, for the services that sign with the scope's key. */
  get loader(): KeyLoader {
    return this.deps.loader;
  }

  /**
   * Resolves and checks the scope of an agent's request on its own signing keys (run it inside
   * `audited`, which records the refusals). `chainRef` is a name, numeric chain_id or uuid;
   * `chainField` names the field it came from in a 400.
   */
  async open(p: Principal, rawAgentId: string, chainRef: string, chainField = 'chain'): Promise<IntentScope> {
    const agentId = agentIdOf(rawAgentId);
    if (p.kind !== 'agent') {
      throw new PermissionDeniedError('only the agent itself signs with its keys; humans cannot', {
        type: INTENT_REFUSALS.notAgent,
      });
    }
    if (p.agentId !== agentId) {
      throw new PermissionDeniedError("an agent signs only with its own keys, not another agent's", {
        type: INTENT_REFUSALS.otherAgent,
      });
    }
    if (!p.intentsApiEnabled) {
      throw new PermissionDeniedError('the Intents API is not enabled on this token', {
        type: INTENT_REFUSALS.intentsDisabled,
      });
    }
    const chain = await this.deps.chains.resolve(chainRef, chainField);
    // The agent's settings and its vault policies' consensus triggers, asked at once.
    const [agent, triggers] = await Promise.all([
      this.deps.identity.agentInOrg(p.orgId, agentId),
      this.deps.policy.approvalRulesOf(p.orgId, agentId),
    ]);
    const settings = withTriggers(agent, triggers);
    if (!settings.isActive) {
      throw new PermissionDeniedError('the agent is deactivated', { type: INTENT_REFUSALS.agentInactive });
    }
    if (!settings.intentsApiEnabled) {
      // The token was minted before the flag was turned off: the agent's setting now decides.
      throw new PermissionDeniedError('the Intents API is not enabled for this agent', {
        type: INTENT_REFUSALS.intentsDisabled,
      });
    }
    const adapter = adapterFor(this.deps.adapters, chain, chainField);
    const key = await this.deps.keys.active(p.orgId, agentId, chain.family);
    if (!key) throw new NotFoundError('signing key', keyNameOf(chain.family));
    if (key.custody !== 'server') {
      throw new PermissionDeniedError(
        `the agent's ${keyNameOf(chain.family)} key has ${key.custody} custody: the server signing path refuses it`,
        { type: INTENT_REFUSALS.clientTss },
      );
    }
    return { agent: p, settings, chain, key, adapter };
  }

  /**
   * Runs a request of `p` on agent `rawAgentId`'s signing path: a refusal it throws (400, 403, 404)
   * is audited as `<action>.refused` with its `reason` (the problem type, or the kind) and the
   * field at fault, then answered as thrown. A 503 or 500 is not a refusal and is not recorded here.
   */
  async audited<T>(p: Principal, action: string, rawAgentId: string, step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (err) {
      if (
        err instanceof CustosError &&
        (err.kind === 'invalid_argument' ||
          err.kind === 'permission_denied' ||
          err.kind === 'not_found' ||
          err.kind === 'unprocessable')
      ) {
        await this.refuse(p, action, rawAgentId, err.type !== 'about:blank' ? err.type : err.kind, {
          status: err.httpStatus,
          ...(err.field ? { field: err.field } : {}),
          // A guardrail's or cap's reason code (never request content).
          ...(err.extensions['reason_code'] ? { reason_code: err.extensions['reason_code'] } : {}),
        });
      }
      throw err;
    }
  }

  /**
   * Audits a refused request (`<action>.refused`, with `reason` and what is safe to name) in a
   * transaction of its own, fail-closed: when the record cannot be written the answer is 503.
   */
  async refuse(
    p: Principal,
    action: string,
    rawAgentId: string,
    reason: string,
    details: Record<string, unknown>,
  ): Promise<void> {
    const agentId = isUuid(rawAgentId) ? rawAgentId.toLowerCase() : null;
    const record = auditOf(p, `${action}.refused`, { type: 'agent', id: agentId }, { reason, ...details });
    await failClosed(this.deps.logger, record.action, () =>
      this.deps.db.transaction((tx) => writeSignerAudit(tx, record)),
    );
  }
}
