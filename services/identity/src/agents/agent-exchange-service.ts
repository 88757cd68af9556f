import type { AuditRecordInput, OutboxGroupCommit } from '@custos/events';
import {
  CustosError,
  type Logger,
  RateLimitedError,
  UnauthenticatedError,
  UnavailableError,
  describeError,
} from '@custos/service-kit';
import { SECRET_TOKEN_PREFIXES, parseSecretToken, secretMatches } from '../credentials/secret-token-fns.js';
import type { WrongSecretBucket } from '../credentials/wrong-secret-bucket.js';
import type { PolicyClient } from '../peers/policy-client.js';
import type { TokenIssuer } from '../tokens/token-issuer.js';
import type { AgentActivity } from './agent-activity.js';
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
 *
 * The `auth.login` record is the exchange's only write: it goes through the outbox's group commit
 * (concurrent exchanges share one INSERT), and the token leaves only once that INSERT committed;
 * when it cannot be committed the exchange answers 503 and no token. `last_active_at` is kept by
 * AgentActivity, at most one write per agent per minute on this replica.
 */
export class AgentExchangeService {
  constructor(
    private readonly agents: Pick<AgentStore, 'findLiveKeyWithAgent' | 'findById'>,
    private readonly routerKeys: Pick<RouterKeyStore, 'findLive'>,
    private readonly issuer: Pick<TokenIssuer, 'agentAccessToken'>,
    private readonly policy: Pick<PolicyClient, 'agentGrants'>,
    private readonly commits: Pick<OutboxGroupCommit, 'audit'>,
    private readonly activity: Pick<AgentActivity, 'seen'>,
    private readonly logger: Pick<Logger, 'error'>,
    private readonly wrongSecrets: Pick<WrongSecretBucket, 'count'>,
  ) {}

  /** Exchanges the credential; `agentId`, when given, must be the credential's agent. */
  exchange(apiKey: string, agentId: string): Promise<AgentToken> {
    return apiKey.startsWith(SECRET_TOKEN_PREFIXES.routerKey)
      ? this.routerKey(apiKey, agentId)
      : this.agentKey(apiKey, agentId);
  }

  private async agentKey(apiKey: string, agentId: string): Promise<AgentToken> {
    const parsed = parseSecretToken(apiKey, SECRET_TOKEN_PREFIXES.agentApiKey);
    // The key and its agent in one round trip; the secret is checked before the agent is looked at.
    const found = parsed && (await this.agents.findLiveKeyWithAgent(parsed.id));
    if (!parsed || !found) throw new UnauthenticatedError(EXCHANGE_FAILED);
    const { key, agent } = found;
    // From here the key names a known agent: a refusal is recorded under the agent's org.
    const refused = { method: 'agent_api_key' };
    if (!secretMatches(parsed.secret, key.secretHash))
      return this.refuseWrongSecret(agent, refused, 'agent_key', key.id);
    if (agentId && agentId.toLowerCase() !== key.agentId)
      return this.refuse(agent, refused, 'agent_mismatch');
    if (!agent.isActive) return this.refuse(agent, refused, 'agent_inactive');
    if (agentKeyExpired(agent.settings)) return this.refuse(agent, refused, 'key_expired');
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
    const agent = await this.agents.findById(key.agentId);
    // A live router key always has its agent (agent_id references agents, on delete cascade).
    if (!agent) throw new UnauthenticatedError(EXCHANGE_FAILED);
    if (!secretMatches(parsed.secret, key.secretHash))
      return this.refuseWrongSecret(agent, refused, 'router_key', key.id);
    if (agentId && agentId.toLowerCase() !== key.agentId)
      return this.refuse(agent, refused, 'agent_mismatch');
    if (!agent.isActive) return this.refuse(agent, refused, 'agent_inactive');
    if (!agent.settings.proxyEnabled) return this.refuse(agent, refused, 'proxy_disabled');
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
   * Mints the token of a verified credential; it is handed out only once its `auth.login` record is
   * committed (fail-closed: 503 and no token when it cannot be).
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
    const login: AuditRecordInput = {
      orgId: agent.orgId,
      actorType: 'agent',
      actorId: agent.id,
      action: 'auth.login',
      resourceType: 'agent',
      resourceId: agent.id,
      metadata: grant.details,
    };
    // The activity write never rejects; the audit commit decides whether the token leaves.
    await Promise.all([this.committed(login), this.activity.seen(agent.id)]);
    return { token: minted.token, expiresIn: minted.expiresIn };
  }

  /** Commits the record, or refuses the exchange with 503 (the database's error goes to the log only). */
  private async committed(record: AuditRecordInput): Promise<void> {
    try {
      await this.commits.audit(record);
    } catch (err) {
      if (err instanceof CustosError) throw err;
      this.logger.error(
        { err: describeError(err), action: record.action },
        'agent token refused: audit record not committed',
      );
      throw new UnavailableError('the sign-in was refused because its audit record could not be committed');
    }
  }

  /**
   * Refuses an exchange of a known credential with the one 401, after recording it under its org
   * (best-effort: a record that cannot be written is logged and never changes the answer).
   */
  private async refuse(agent: Agent, details: Record<string, unknown>, reason: string): Promise<never> {
    await this.record(agent, 'auth.login_failed', { ...details, reason });
    throw new UnauthenticatedError(EXCHANGE_FAILED);
  }

  /**
   * A wrong secret: the audited 401 up to EXCHANGE_WRONG_SECRETS_PER_KEY_PER_MINUTE of them per key
   * in its minute, from any address; past that 429 with no record of its own (the first one over
   * writes one `auth.exchange_refusals_limited`), so a flood cannot flood the audit log.
   */
  private async refuseWrongSecret(
    agent: Agent,
    details: Record<string, unknown>,
    kind: 'agent_key' | 'router_key',
    keyId: string,
  ): Promise<never> {
    const counted = await this.wrongSecrets.count(kind, keyId);
    if (counted.verdict === 'audit') return this.refuse(agent, details, 'wrong_secret');
    if (counted.verdict === 'limit') {
      await this.record(agent, 'auth.exchange_refusals_limited', {
        ...details,
        ...(kind === 'agent_key' ? { key_id: keyId } : {}),
        per_minute: counted.perMinute,
      });
    }
    throw new RateLimitedError(counted.retryAfter);
  }

  /** Writes a refusal's record (best-effort: a failure is logged and never changes the answer). */
  private async record(agent: Agent, action: string, metadata: Record<string, unknown>): Promise<void> {
    try {
      await this.commits.audit({
        orgId: agent.orgId,
        actorType: 'anonymous',
        actorId: null,
        action,
        resourceType: 'agent',
        resourceId: agent.id,
        metadata,
      });
    } catch (err) {
      this.logger.error({ err: describeError(err), action }, 'audit record of a refusal not written');
    }
  }
}
