import { type OrgAdmin, type Principal, requireHumanAdmin } from '@custos/auth';
import { auditOf } from '@custos/events';
import {
  ConflictError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  isUuid,
} from '@custos/service-kit';
import { SECRET_TOKEN_PREFIXES, generateSecretToken } from '../credentials/secret-token-fns.js';
import { audit } from '../audit/identity-audit.js';
import type { RevocationStore } from '../tokens/revocation-store.js';
import { agentInOrg } from './agent-access.js';
import type { StepUpChecker } from '../mfa/mfa-types.js';
import type { AgentStore } from './agent-store.js';
import { ROUTER_KEY_TOKEN_TTL_SECONDS, checkRouterKeyLimits } from './router-key-fns.js';
import type { RouterKeyRow, RouterKeyStore } from './router-key-store.js';
import type { RouterKey, RouterKeyLimits } from './router-key-types.js';

const PREFIX = SECRET_TOKEN_PREFIXES.routerKey;
/** The step-up purpose of issuing a router key (a new credential of the agent, SPEC.md §5.9). */
export const ROUTER_KEY_CREATE_PURPOSE = 'agent.router_key.create';
/** An agent holds at most this many live router keys. */
export const MAX_LIVE_ROUTER_KEYS = 50;

function view(row: RouterKeyRow): RouterKey {
  return {
    id: row.id,
    agentId: row.agentId,
    keyPrefix: `${PREFIX}${row.tokenId}`,
    maxConcurrentStreams: row.maxConcurrentStreams,
    spendCapMicroUsd: row.spendCapMicroUsd,
    createdBy: row.createdBy,
    createdAt: row.createdAt,
    revokedAt: row.revokedAt,
  };
}

function manager(p: Principal): OrgAdmin {
  requireHumanAdmin(p, 'manage router keys');
  return p;
}

/**
 * Router keys (`sk-proxy-v1-`, SPEC.md §2.6, §4.4, §5.4): an org owner or admin issues them for a
 * proxy-enabled agent (the exchange is AgentExchangeService's). Tokens minted from a key carry its
 * lookup id as `sid`, so revoking the key ends them at once.
 */
export class RouterKeyService {
  constructor(
    private readonly keys: RouterKeyStore,
    private readonly agents: AgentStore,
    private readonly revocations: Pick<RevocationStore, 'revokeSession'>,
    private readonly stepUp: StepUpChecker,
  ) {}

  /**
   * Issues a key for a proxy-enabled, active agent; the key is returned only here. A new credential
   * of the agent, so it needs the step-up `agent.router_key.create` as agent key rotation does.
   */
  async create(
    p: Principal,
    agentId: string,
    limits: RouterKeyLimits,
    credential: unknown,
  ): Promise<{ key: RouterKey; routerKey: string }> {
    const user = manager(p);
    const agent = await agentInOrg(this.agents, user, agentId);
    checkRouterKeyLimits(limits);
    if (!agent.isActive) throw new ConflictError('the agent is deactivated');
    if (!agent.settings.proxyEnabled) {
      throw new ConflictError('router keys are only for agents with proxy_enabled: true', 'proxy_enabled');
    }
    if ((await this.keys.countLive(agent.id)) >= MAX_LIVE_ROUTER_KEYS) {
      throw new PermissionDeniedError(`at most ${MAX_LIVE_ROUTER_KEYS} live router keys per agent`, {
        type: 'resource_limit_exceeded',
      });
    }
    // After the refusals that spend nothing: a refused request does not cost the caller's rat_.
    await this.stepUp.confirmStepUp(user, ROUTER_KEY_CREATE_PURPOSE, credential);
    const t = generateSecretToken(PREFIX);
    const row = await this.agents.transaction(async (tx) => {
      const created = await this.keys.insert(
        { tokenId: t.id, agentId: agent.id, secretHash: t.secretHash, ...limits, createdBy: user.userId },
        tx,
      );
      await audit(
        tx,
        auditOf(
          user,
          'router_key.created',
          { type: 'router_key', id: created.id },
          {
            agent_id: agent.id,
            max_concurrent_streams: created.maxConcurrentStreams,
            spend_cap_micro_usd: created.spendCapMicroUsd,
          },
        ),
      );
      return created;
    });
    return { key: view(row), routerKey: t.token };
  }

  /** An agent's keys, revoked ones included, oldest first. */
  async list(p: Principal, agentId: string): Promise<RouterKey[]> {
    const agent = await agentInOrg(this.agents, manager(p), agentId);
    return (await this.keys.listForAgent(agent.id)).map(view);
  }

  /** Revokes a key, and every token minted from it, at once. */
  async revoke(p: Principal, agentId: string, keyId: string): Promise<void> {
    const user = manager(p);
    const agent = await agentInOrg(this.agents, user, agentId);
    if (!isUuid(keyId)) throw new InvalidArgumentError('key_id', 'key_id must be a UUID');
    const row = await this.agents.transaction(async (tx) => {
      const revoked = await this.keys.revoke(agent.id, keyId.toLowerCase(), tx);
      if (!revoked) return undefined;
      await audit(
        tx,
        auditOf(user, 'router_key.revoked', { type: 'router_key', id: revoked.id }, { agent_id: agent.id }),
      );
      return revoked;
    });
    if (!row) throw new NotFoundError('router key', keyId);
    // Tokens minted from the key live 60 s; the revocation outlives the youngest of them.
    await this.revocations.revokeSession(
      row.tokenId,
      new Date(Date.now() + 2 * ROUTER_KEY_TOKEN_TTL_SECONDS * 1000),
    );
  }
}
