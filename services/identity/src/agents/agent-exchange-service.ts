import { UnauthenticatedError } from '@custos/service-kit';
import { SECRET_TOKEN_PREFIXES, parseSecretToken, secretMatches } from '../credentials/secret-token-fns.js';
import { audit, auditRefusal } from '../audit/identity-audit.js';
import type { PolicyClient } from '../peers/policy-client.js';
import type { TokenIssuer } from '../tokens/token-issuer.js';
import { agentAccess, agentKeyExpired, agentTokenTtl } from './agent-fns.js';
import type { AgentStore } from './agent-store.js';
import type { Agent, AgentToken } from './agent-types.js';
import { ROUTER_KEY_TOKEN_TTL_SECONDS } from './router-key-fns.js';
import type { RouterKeyStore } from './router-key-store.js';

/** Every refused exchange answers this, whatever the credential and the reason. */
const EXCHANGE_FAILED = 'invalid agent credentials';

/** What a verified credential grants, before the token is minted. */
interface Grant {
  /** Carried as `sid`: revoking this key ends the token. */
  sessionId: string;
  ttlSeconds: number;
  routerKey?: { id: string; maxConcurrentStreams: number | null; spendCapMicroUsd: number | null };
  /** What the `auth.login` record says about the credential. */
  details: Record<string, unknown>;
}

/**
 * `POST /v1/auth/agent-token` (spec §4.1, §5.4): an agent API key (`ocv_`, with or without the
 * agent id) exchanges for a token of the agent's lifetime; a router key (`sk-proxy-v1-`) of a
 * proxy-enabled agent for a 60-second token with a `router_key` claim. Each refusal answers the
 * same 401; one of a known agent is recorded under its org.
 */
export class AgentExchangeService {
  constructor(
    private readonly agents: AgentStore,
    private readonly routerKeys: RouterKeyStore,
    private readonly issuer: Pick<TokenIssuer, 'agentAccessToken'>,
    private readonly policy: Pick<PolicyClient, 'agentGrants'>,
  ) {}

  /** Exchanges the credential; `agentId`, when given, must be the credential's agent. */
  exchange(apiKey: string, agentId: string): Promise<AgentToken> {
    return apiKey.startsWith(SECRET_TOKEN_PREFIXES.routerKey)
      ? this.routerKey(apiKey, agentId)
      : this.agentKey(apiKey, agentId);
  }

  private async agentKey(apiKey: string, agentId: string): Promise<AgentToken> {
    const parsed = parseSecretToken(apiKey, SECRET_TOKEN_PREFIXES.agentApiKey);
    const key = parsed && (await this.agents.findLiveKey(parsed.id));
    if (!parsed || !key) throw new UnauthenticatedError(EXCHANGE_FAILED);
    // From here the key names a known agent: a refusal is recorded under the agent's org.
    const refused = { method: 'agent_api_key' };
    if (!secretMatches(parsed.secret, key.secretHash))
      return this.refuse(key.agentId, refused, 'wrong_secret');
    if (agentId && agentId.toLowerCase() !== key.agentId)
      return this.refuse(key.agentId, refused, 'agent_mismatch');
    const agent = await this.agents.findById(key.agentId);
    if (!agent?.isActive) return this.refuse(key.agentId, refused, 'agent_inactive');
    if (agentKeyExpired(agent.settings)) return this.refuse(key.agentId, refused, 'key_expired');
    const ttlSeconds = agentTokenTtl(agent.settings);
    return this.issue(agent, {
      sessionId: key.id,
      ttlSeconds,
      details: { method: 'agent_api_key', expires_in: ttlSeconds },
    });
  }

  private async routerKey(routerKey: string, agentId: string): Promise<AgentToken> {
    const parsed = parseSecretToken(routerKey, SECRET_TOKEN_PREFIXES.routerKey);
    const key = parsed && (await this.routerKeys.findLive(parsed.id));
    if (!parsed || !key) throw new UnauthenticatedError(EXCHANGE_FAILED);
    const refused = { method: 'router_key', router_key_id: key.id };
    if (!secretMatches(parsed.secret, key.secretHash))
      return this.refuse(key.agentId, refused, 'wrong_secret');
    if (agentId && agentId.toLowerCase() !== key.agentId)
      return this.refuse(key.agentId, refused, 'agent_mismatch');
    const agent = await this.agents.findById(key.agentId);
    if (!agent?.isActive) return this.refuse(key.agentId, refused, 'agent_inactive');
    if (!agent.settings.proxyEnabled) return this.refuse(key.agentId, refused, 'proxy_disabled');
    return this.issue(agent, {
      sessionId: key.tokenId,
      ttlSeconds: ROUTER_KEY_TOKEN_TTL_SECONDS,
      routerKey: {
        id: key.id,
        maxConcurrentStreams: key.maxConcurrentStreams,
        spendCapMicroUsd: key.spendCapMicroUsd,
      },
      details: { method: 'router_key', router_key_id: key.id },
    });
  }

  /**
   * Mints the token of a verified credential; it is handed out only once the agent's last activity
   * and its `auth.login` record are committed.
   */
  private async issue(agent: Agent, grant: Grant): Promise<AgentToken> {
    const s = agent.settings;
    const access = agentAccess(s, await this.policy.agentGrants(agent));
    const minted = this.issuer.agentAccessToken({
      id: agent.id,
      keyId: grant.sessionId,
      orgId: agent.orgId,
      createdBy: agent.createdBy,
      ...access,
      intentsApiEnabled: s.intentsApiEnabled,
      proxyEnabled: s.proxyEnabled,
      proxyConfig: s.proxyConfig,
      environment: s.environment,
      ttlSeconds: grant.ttlSeconds,
      ...(grant.routerKey ? { routerKey: grant.routerKey } : {}),
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
        metadata: grant.details,
      });
    });
    return { token: minted.token, expiresIn: minted.expiresIn };
  }

  /** Refuses an exchange of a known credential with the one 401, after recording it under its org. */
  private async refuse(agentId: string, details: Record<string, unknown>, reason: string): Promise<never> {
    const agent = await this.agents.findById(agentId);
    if (agent) {
      await auditRefusal(this.agents, {
        orgId: agent.orgId,
        actorType: 'anonymous',
        actorId: null,
        action: 'auth.login_failed',
        resourceType: 'agent',
        resourceId: agent.id,
        metadata: { ...details, reason },
      });
    }
    throw new UnauthenticatedError(EXCHANGE_FAILED);
  }
}
