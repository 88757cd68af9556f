import type { TokenVerifier } from '@custos/auth';
import {
  InvalidArgumentError,
  PermissionDeniedError,
  UnauthenticatedError,
  UnavailableError,
} from '@custos/service-kit';
import { agentAccess, agentKeyExpired } from '../agents/agent-fns.js';
import type { AgentStore } from '../agents/agent-store.js';
import type { Agent } from '../agents/agent-types.js';
import type { PolicyClient } from '../peers/policy-client.js';
import { audit } from '../audit/identity-audit.js';
import { SECRET_TOKEN_PREFIXES, parseSecretToken, secretMatches } from '../credentials/secret-token-fns.js';
import { newTokenId } from '../tokens/signing-key-fns.js';
import {
  API_KEY_TOKEN_TYPE,
  type FederationKey,
  JWT_TOKEN_TYPE,
  MAX_FEDERATED_TTL_SECONDS,
  TOKEN_EXCHANGE_GRANT,
  narrowScopes,
  signRs256,
} from './federation-fns.js';

/** Every refused subject token answers this, whatever the reason. */
const SUBJECT_REFUSED = 'invalid subject token';

/** What a token exchange asks for (RFC 8693 §2.1). */
export interface FederatedTokenRequest {
  grantType: string;
  subjectToken: string;
  subjectTokenType: string;
  audience: string;
  scope: string;
  requestedTokenType: string;
}

/** The token-exchange response (RFC 8693 §2.2). */
export interface FederatedTokenView {
  accessToken: string;
  issuedTokenType: string;
  tokenType: 'Bearer';
  expiresIn: number;
  scope: string;
}

/** The agent behind a subject token, and what that token allows. */
interface Subject {
  agent: Agent;
  /** Scopes the subject token can pass on. */
  scopes: string[];
  /** Unix seconds after which the subject credential no longer counts (Infinity: no limit). */
  validUntil: number;
}

/**
 * RFC 8693 exchange of an agent's credential for an RS256 token addressed to a relying party
 * outside Custos (spec §4.1, §5.6). The token's `aud` is the relying party and its `token_use` is
 * `federated`, so Custos's own API never accepts it.
 */
export class FederationService {
  constructor(
    private readonly agents: AgentStore,
    private readonly verifier: TokenVerifier,
    private readonly key: FederationKey | undefined,
    private readonly issuer: string,
    private readonly policy: Pick<PolicyClient, 'agentGrants'>,
  ) {}

  /** Checks the request and the agent's federation settings, then mints the token. */
  async exchange(req: FederatedTokenRequest): Promise<FederatedTokenView> {
    if (!this.key) throw new UnavailableError('federated tokens are not configured on this server');
    if (req.grantType !== TOKEN_EXCHANGE_GRANT)
      throw new InvalidArgumentError('grant_type', `grant_type must be ${TOKEN_EXCHANGE_GRANT}`);
    if (req.subjectTokenType !== JWT_TOKEN_TYPE && req.subjectTokenType !== API_KEY_TOKEN_TYPE)
      throw new InvalidArgumentError(
        'subject_token_type',
        `subject_token_type must be ${JWT_TOKEN_TYPE} or ${API_KEY_TOKEN_TYPE}`,
      );
    if (req.requestedTokenType && req.requestedTokenType !== JWT_TOKEN_TYPE)
      throw new InvalidArgumentError(
        'requested_token_type',
        `requested_token_type must be ${JWT_TOKEN_TYPE}`,
      );
    if (!req.subjectToken) throw new InvalidArgumentError('subject_token', 'subject_token is required');
    if (!req.audience) throw new InvalidArgumentError('audience', 'audience is required');

    const subject =
      req.subjectTokenType === JWT_TOKEN_TYPE
        ? await this.fromJwt(req.subjectToken)
        : await this.fromApiKey(req.subjectToken);
    const s = subject.agent.settings;
    if (!s.federationEnabled) throw new PermissionDeniedError('federation is not enabled for this agent');
    if (!s.federationAudiences.includes(req.audience))
      throw new PermissionDeniedError('audience is not one of the agent\u2019s federation audiences');
    const granted = narrowScopes(subject.scopes, req.scope);
    if (!granted.ok)
      throw new PermissionDeniedError('scope may only narrow the agent\u2019s scopes', { field: 'scope' });

    const now = Math.floor(Date.now() / 1000);
    // Never outlives the credential it came from.
    const ttl = Math.max(
      1,
      Math.min(s.federatedTokenTtlSeconds, MAX_FEDERATED_TTL_SECONDS, subject.validUntil - now),
    );
    const scope = granted.scopes.join(' ');
    const jti = newTokenId();
    const token = signRs256(
      {
        iss: this.issuer,
        sub: `agent:${subject.agent.id}`,
        aud: req.audience,
        org: subject.agent.orgId,
        scope,
        token_use: 'federated',
        jti,
        iat: now,
        exp: now + ttl,
      },
      this.key,
    );
    // Handed out only once its audit record is committed.
    await this.agents.transaction((tx) =>
      audit(tx, {
        orgId: subject.agent.orgId,
        actorType: 'agent',
        actorId: subject.agent.id,
        action: 'auth.login',
        resourceType: 'agent',
        resourceId: subject.agent.id,
        metadata: {
          method: 'federated',
          subject_token_type: req.subjectTokenType === JWT_TOKEN_TYPE ? 'jwt' : 'agent_api_key',
          audience: req.audience,
          scopes: granted.scopes,
          jti,
          expires_in: ttl,
        },
      }),
    );
    return {
      accessToken: token,
      issuedTokenType: JWT_TOKEN_TYPE,
      tokenType: 'Bearer',
      expiresIn: ttl,
      scope,
    };
  }

  /** An agent access JWT of this issuer; a user's token is refused with 403. */
  private async fromJwt(token: string): Promise<Subject> {
    let p;
    try {
      p = await this.verifier.verify(token);
    } catch {
      throw new UnauthenticatedError(SUBJECT_REFUSED);
    }
    if (p.kind !== 'agent') throw new PermissionDeniedError('only agent tokens can be exchanged');
    const agent = await this.liveAgent(p.agentId, p.orgId);
    // The token passes on no more than it carries, nor more than the agent holds now.
    const { scopes: current } = await this.access(agent);
    return { agent, scopes: p.scopes.filter((x) => current.includes(x)), validUntil: p.expiresAt };
  }

  /** A live `ocv_` agent key (same checks as the agent-token exchange). */
  private async fromApiKey(apiKey: string): Promise<Subject> {
    const parsed = parseSecretToken(apiKey, SECRET_TOKEN_PREFIXES.agentApiKey);
    if (!parsed) throw new UnauthenticatedError(SUBJECT_REFUSED);
    const key = await this.agents.findLiveKey(parsed.id);
    if (!key || !secretMatches(parsed.secret, key.secretHash))
      throw new UnauthenticatedError(SUBJECT_REFUSED);
    const agent = await this.liveAgent(key.agentId);
    const s = agent.settings;
    if (agentKeyExpired(s)) throw new UnauthenticatedError(SUBJECT_REFUSED);
    const expiresAt = s.apiKeyExpiresAt ? Math.floor(Date.parse(s.apiKeyExpiresAt) / 1000) : Infinity;
    return { agent, scopes: (await this.access(agent)).scopes, validUntil: expiresAt };
  }

  /** What the agent's next token would carry. */
  private async access(agent: Agent) {
    return agentAccess(agent.settings, await this.policy.agentGrants(agent));
  }

  private async liveAgent(agentId: string, orgId?: string): Promise<Agent> {
    const agent = await this.agents.findById(agentId);
    if (!agent?.isActive || (orgId !== undefined && agent.orgId !== orgId))
      throw new UnauthenticatedError(SUBJECT_REFUSED);
    return agent;
  }
}
