import type { Principal, UserPrincipal } from '@custos/auth';
import {
  ConflictError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  UnauthenticatedError,
  isUuid,
} from '@custos/service-kit';
import {
  SECRET_TOKEN_PREFIXES,
  generateSecretToken,
  parseSecretToken,
  secretMatches,
} from '../credentials/secret-token-fns.js';
import { audit, auditRefusal } from '../audit/identity-audit.js';
import type { RevocationStore } from '../tokens/revocation-store.js';
import type { MintedAccessToken, TokenIssuer } from '../tokens/token-issuer.js';
import { effectiveSettings } from './agent-fns.js';
import { agentInOrg, agentManager } from './agent-access.js';
import type { AgentPeers } from './agent-limits.js';
import type { AgentRow, AgentStore } from './agent-store.js';
import { ROUTER_KEY_TOKEN_TTL_SECONDS, parseRouterKeyLimits } from './router-key-fns.js';
import type { RouterKeyRow, RouterKeyStore } from './router-key-store.js';

const PREFIX = SECRET_TOKEN_PREFIXES.routerKey;
/** Every refused exchange answers what a refused agent key answers, whatever the reason. */
const EXCHANGE_FAILED = 'invalid agent credentials';
/** An agent holds at most this many live router keys. */
export const MAX_LIVE_ROUTER_KEYS = 50;

/** The public view of a router key (never its secret). */
export interface RouterKeyView {
  id: string;
  agentId: string;
  keyPrefix: string;
  maxConcurrentStreams: number | null;
  spendCapMicroUsd: number | null;
  createdBy: string;
  createdAt: Date;
  revokedAt: Date | null;
}

function view(row: RouterKeyRow): RouterKeyView {
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

/**
 * Router keys (`sk-proxy-v1-`, SPEC.md §2.6, §4.4, §5.4): an org owner or admin issues them for a
 * proxy-enabled agent, and the key alone exchanges for a 60-second agent token with a `router_key`
 * claim. Such tokens carry the key's lookup id as `sid`, so revoking the key ends them at once.
 */
export class RouterKeyService {
  constructor(
    private readonly keys: RouterKeyStore,
    private readonly agents: AgentStore,
    private readonly issuer: TokenIssuer,
    private readonly revocations: RevocationStore,
    private readonly peers: AgentPeers,
  ) {}

  private manager(p: Principal): UserPrincipal {
    return agentManager(p, 'router keys');
  }

  private agentInOrg(p: UserPrincipal, agentId: string): Promise<AgentRow> {
    return agentInOrg(this.agents, p, agentId);
  }

  /** Issues a key for a proxy-enabled, active agent; the key is returned only here. */
  async create(
    p: Principal,
    agentId: string,
    fields: Record<string, unknown>,
  ): Promise<{ key: RouterKeyView; routerKey: string }> {
    const user = this.manager(p);
    const agent = await this.agentInOrg(user, agentId);
    const limits = parseRouterKeyLimits(fields);
    if (!agent.isActive) throw new ConflictError('the agent is deactivated');
    if (!effectiveSettings(agent.settings).proxy_enabled) {
      throw new ConflictError('router keys are only for agents with proxy_enabled: true', 'proxy_enabled');
    }
    if ((await this.keys.countLive(agent.id)) >= MAX_LIVE_ROUTER_KEYS) {
      throw new PermissionDeniedError(`at most ${MAX_LIVE_ROUTER_KEYS} live router keys per agent`, {
        type: 'resource_limit_exceeded',
      });
    }
    const t = generateSecretToken(PREFIX);
    const row = await this.agents.transaction(async (tx) => {
      const created = await this.keys.insert(
        { tokenId: t.id, agentId: agent.id, secretHash: t.secretHash, ...limits, createdBy: user.userId },
        tx,
      );
      await audit(tx, {
        orgId: agent.orgId,
        actorType: 'user',
        actorId: user.userId,
        action: 'router_key.created',
        resourceType: 'router_key',
        resourceId: created.id,
        metadata: {
          agent_id: agent.id,
          max_concurrent_streams: created.maxConcurrentStreams,
          spend_cap_micro_usd: created.spendCapMicroUsd,
        },
      });
      return created;
    });
    return { key: view(row), routerKey: t.token };
  }

  /** An agent's keys, revoked ones included, oldest first. */
  async list(p: Principal, agentId: string): Promise<RouterKeyView[]> {
    const agent = await this.agentInOrg(this.manager(p), agentId);
    return (await this.keys.listForAgent(agent.id)).map(view);
  }

  /** Revokes a key, and every token minted from it, at once. */
  async revoke(p: Principal, agentId: string, keyId: string): Promise<void> {
    const user = this.manager(p);
    const agent = await this.agentInOrg(user, agentId);
    if (!isUuid(keyId)) throw new InvalidArgumentError('key_id', 'key_id must be a UUID');
    const row = await this.agents.transaction(async (tx) => {
      const revoked = await this.keys.revoke(agent.id, keyId.toLowerCase(), tx);
      if (!revoked) return undefined;
      await audit(tx, {
        orgId: agent.orgId,
        actorType: 'user',
        actorId: user.userId,
        action: 'router_key.revoked',
        resourceType: 'router_key',
        resourceId: revoked.id,
        metadata: { agent_id: agent.id },
      });
      return revoked;
    });
    if (!row) throw new NotFoundError('router key', keyId);
    // Tokens minted from the key live 60 s; the revocation outlives the youngest of them.
    await this.revocations.revokeSession(
      row.tokenId,
      new Date(Date.now() + 2 * ROUTER_KEY_TOKEN_TTL_SECONDS * 1000),
    );
  }

  /**
   * Exchanges a router key (and, when the caller sent one, the matching agent id) for a 60-second
   * agent token; only while the key is live and the agent active and proxy-enabled.
   */
  async exchange(routerKey: string, agentId: string): Promise<MintedAccessToken> {
    const parsed = parseSecretToken(routerKey, PREFIX);
    if (!parsed) throw new UnauthenticatedError(EXCHANGE_FAILED);
    const key = await this.keys.findLive(parsed.id);
    if (!key) throw new UnauthenticatedError(EXCHANGE_FAILED);
    // From here the key names a known agent: a refusal is recorded under the agent's org.
    if (!secretMatches(parsed.secret, key.secretHash)) return this.refuse(key, 'wrong_secret');
    if (agentId && agentId.toLowerCase() !== key.agentId) return this.refuse(key, 'agent_mismatch');
    const agent = await this.agents.findById(key.agentId);
    if (!agent?.isActive) return this.refuse(key, 'agent_inactive');
    const s = effectiveSettings(agent.settings);
    if (!s.proxy_enabled) return this.refuse(key, 'proxy_disabled');
    const access = await this.peers.tokenAccess(agent, s);
    // Minted first, handed out only once the sign-in and its audit record are committed.
    const minted = this.issuer.agentAccessToken({
      id: agent.id,
      keyId: key.tokenId,
      orgId: agent.orgId,
      createdBy: agent.createdBy,
      ...access,
      intentsApiEnabled: s.intents_api_enabled,
      proxyEnabled: s.proxy_enabled,
      proxyConfig: s.proxy_config,
      environment: s.environment,
      ttlSeconds: ROUTER_KEY_TOKEN_TTL_SECONDS,
      routerKey: {
        id: key.id,
        maxConcurrentStreams: key.maxConcurrentStreams,
        spendCapMicroUsd: key.spendCapMicroUsd,
      },
    });
    await this.agents.transaction(async (tx) => {
      await this.agents.update(agent.id, { lastActiveAt: new Date() }, tx);
      await audit(tx, {
        orgId: agent.orgId,
        actorType: 'agent',
        actorId: agent.id,
        action: 'auth.login',
        resourceType: 'agent',
        resourceId: agent.id,
        metadata: { method: 'router_key', router_key_id: key.id },
      });
    });
    return minted;
  }

  /** Refuses an exchange of a known key with the one 401, after recording it under the agent's org. */
  private async refuse(key: RouterKeyRow, reason: string): Promise<never> {
    const agent = await this.agents.findById(key.agentId);
    if (agent) {
      await auditRefusal(this.agents, {
        orgId: agent.orgId,
        actorType: 'anonymous',
        actorId: null,
        action: 'auth.login_failed',
        resourceType: 'agent',
        resourceId: agent.id,
        metadata: { method: 'router_key', router_key_id: key.id, reason },
      });
    }
    throw new UnauthenticatedError(EXCHANGE_FAILED);
  }
}
