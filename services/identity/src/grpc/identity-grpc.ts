import { type TokenVerifier, bearerToken } from '@custos/auth';
import type { IdentityServiceServer } from '@custos/proto/custos/identity/v1/service';
import type { ApiKey, TokenSet, UserProfile } from '@custos/proto/custos/identity/v1/messages';
import {
  type AsyncService,
  InvalidArgumentError,
  MESH_SERVICES,
  UnauthenticatedError,
  currentRequestContext,
} from '@custos/service-kit';
import type { AgentExchangeService } from '../agents/agent-exchange-service.js';
import type { AgentService } from '../agents/agent-service.js';
import type { ApiKeyView, PersonalKeyService } from '../keys/personal-key-service.js';
import type { SigningKeyRing } from '../tokens/signing-key-store.js';
import { agentChangeOf, agentMessage } from './agent-messages.js';
import { callerResolver } from './caller.js';
import { TokenIssuer, type TokenSettings } from '../tokens/token-issuer.js';
import type { ProfileService } from '../users/profile-service.js';
import type { SessionService } from '../users/session-service.js';
import type { SignupService } from '../users/signup-service.js';
import type { TokenSetView, User } from '../users/user-types.js';

function tokenSet(t: TokenSetView): TokenSet {
  return {
    accessToken: t.accessToken,
    tokenType: t.tokenType,
    expiresIn: t.expiresIn,
    refreshToken: t.refreshToken,
  };
}

function apiKey(k: ApiKeyView): ApiKey {
  return {
    id: k.id,
    name: k.name,
    keyPrefix: k.keyPrefix,
    isActive: k.isActive,
    createdAt: k.createdAt.toISOString(),
    expiresAt: k.expiresAt?.toISOString() ?? '',
    lastUsedAt: k.lastUsedAt?.toISOString() ?? '',
  };
}

function profile(u: User): UserProfile {
  return {
    id: u.id,
    email: u.email,
    displayName: u.displayName,
    authMethod: u.authMethod,
    role: u.role,
    emailVerified: u.emailVerified,
    marketingEmails: u.marketingEmails,
    totpEnabled: u.totpEnabled,
    createdAt: u.createdAt.toISOString(),
    orgId: u.orgId,
  };
}

/** The services a token may be re-signed for: those that act for a user behind the gateway. */
const SERVICE_TOKEN_AUDIENCES: ReadonlySet<string> = new Set(
  MESH_SERVICES.filter((s) => s !== 'gateway' && s !== 'identity'),
);

/** The payload of a compact JWS (its signature checked by the caller). */
function jwtPayload(token: string): Record<string, unknown> {
  const part = token.split('.')[1] ?? '';
  return JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>;
}

/** gRPC adapter of IdentityService: decode, call the rules, encode. */
export function identityGrpc(deps: {
  signups: SignupService;
  sessions: SessionService;
  profiles: ProfileService;
  agents: AgentService;
  agentExchange: AgentExchangeService;
  keys: PersonalKeyService;
  ring: SigningKeyRing;
  settings: TokenSettings;
  verifier: TokenVerifier;
  /** Public keys of other signers to publish beside the ring's (the federation RS256 key). */
  extraJwks?: ReadonlyArray<Record<string, unknown>> | undefined;
}): AsyncService<IdentityServiceServer> {
  const caller = callerResolver(deps.verifier);
  const issuer = new TokenIssuer(deps.ring, deps.settings);

  return {
    async getJwks() {
      return {
        jwksJson: JSON.stringify({ keys: [...deps.ring.jwks().keys, ...(deps.extraJwks ?? [])] }),
        activeKid: deps.ring.active().kid,
      };
    },
    async mintServiceToken(req) {
      if (!SERVICE_TOKEN_AUDIENCES.has(req.service)) {
        throw new InvalidArgumentError('service', 'service must be a mesh service behind the gateway');
      }
      // The caller's token as the gateway passed it, verified here like on every other RPC
      // (public audience, signature, issuer, expiry, revocation) before its claims are re-signed.
      const token = bearerToken(currentRequestContext()?.authorization);
      if (!token) throw new UnauthenticatedError();
      await deps.verifier.verify(token);
      const t = issuer.serviceAccessToken(jwtPayload(token), req.service);
      return { accessToken: t.token, expiresAt: String(t.expiresAt) };
    },
    async signup(req) {
      const r = await deps.signups.signup({
        email: req.email,
        password: req.password,
        displayName: req.displayName,
      });
      return {
        message: r.verificationRequired ? 'Check your e-mail to verify your address.' : 'Account created.',
        email: r.email,
        verificationRequired: r.verificationRequired,
        ...(r.tokens ? { tokens: tokenSet(r.tokens) } : {}),
      };
    },
    async verifyEmail(req) {
      const tokens = await deps.signups.verifyEmail(req.token, req.withoutSession);
      return tokens ? { tokens: tokenSet(tokens) } : {};
    },
    async login(req) {
      const r = await deps.sessions.login({ email: req.email, password: req.password });
      if (r.kind === 'mfa') return { result: { $case: 'mfa', value: r.challenge } };
      return { result: { $case: 'tokens', value: tokenSet(r.tokens) } };
    },
    async refreshSession(req) {
      return { tokens: tokenSet(await deps.sessions.refresh(req.refreshToken)) };
    },
    async revokeSession(_req, call) {
      await deps.sessions.signOut(await caller(call));
      return {};
    },
    async getProfile(_req, call) {
      return { profile: profile(await deps.profiles.profile(await caller(call))) };
    },
    async updateProfile(req, call) {
      const u = await deps.profiles.update(await caller(call), {
        displayName: req.displayName,
        marketingEmails: req.marketingEmails,
      });
      return { profile: profile(u) };
    },
    async createAgent(req, call) {
      const r = await deps.agents.create(await caller(call), agentChangeOf(req.fields));
      return { agent: agentMessage(r.agent), apiKey: r.apiKey };
    },
    async listAgents(_req, call) {
      return { agents: (await deps.agents.list(await caller(call))).map(agentMessage) };
    },
    async getAgent(req, call) {
      return { agent: agentMessage(await deps.agents.get(await caller(call), req.agentId)) };
    },
    async getOrgAgent(req) {
      // Asked by a service (signer, by certificate) that verified its caller's token and names its org.
      return { agent: agentMessage(await deps.agents.getInOrg(req.orgId, req.agentId)) };
    },
    async updateAgent(req, call) {
      const p = await caller(call);
      // Only the gateway calls UpdateAgent (the allow-list): it sets approval_id only after
      // approvals consumed that approval for approved_change_hash.
      const r = await deps.agents.edit(p, req.agentId, agentChangeOf(req.fields), req.credential, {
        dryRun: req.dryRun,
        ...(req.approvalId !== ''
          ? { approval: { id: req.approvalId, changeHash: req.approvedChangeHash } }
          : {}),
      });
      const g = r.guardrailChange;
      return {
        agent: agentMessage(r.agent),
        guardrailChange: g && {
          change: g.change,
          changeHash: g.changeHash,
          before: g.before,
          after: g.after,
          approvalRequired: g.approvalRequired,
        },
        applied: r.applied,
        revisionId: r.revisionId ?? '',
      };
    },
    async listGuardrailRevisions(req, call) {
      const list = await deps.agents.revisions(await caller(call), {
        agentId: req.agentId,
        limit: req.limit,
      });
      return {
        revisions: list.map((r) => ({
          id: r.id,
          agentId: r.agentId,
          actorId: r.actorId,
          change: r.change,
          before: r.before,
          after: r.after,
          approvalId: r.approvalId ?? '',
          createdAt: r.createdAt.toISOString(),
        })),
      };
    },
    async deactivateAgent(req, call) {
      await deps.agents.deactivate(await caller(call), req.agentId);
      return {};
    },
    async getSelfAgent(_req, call) {
      return { agent: agentMessage(await deps.agents.self(await caller(call))) };
    },
    async rotateAgentKey(req, call) {
      return { apiKey: await deps.agents.rotateKey(await caller(call), req.agentId, req.credential) };
    },
    async exchangeAgentCredential(req) {
      const t = await deps.agentExchange.exchange(req.apiKey, req.agentId);
      return {
        tokens: { accessToken: t.token, tokenType: 'Bearer', expiresIn: t.expiresIn, refreshToken: '' },
      };
    },
    async createApiKey(req, call) {
      const r = await deps.keys.create(await caller(call), req.name, req.expiresAt, req.credential);
      return { key: apiKey(r.key), apiKey: r.apiKey };
    },
    async listApiKeys(_req, call) {
      return { keys: (await deps.keys.list(await caller(call))).map(apiKey) };
    },
    async revokeApiKey(req, call) {
      await deps.keys.revoke(await caller(call), req.keyId);
      return {};
    },
    async exchangeApiKey(req) {
      const t = await deps.keys.exchange(req.apiKey);
      return {
        tokens: { accessToken: t.token, tokenType: 'Bearer', expiresIn: t.expiresIn, refreshToken: '' },
      };
    },
  };
}
