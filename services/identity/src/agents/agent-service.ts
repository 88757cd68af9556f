import type { Principal, UserPrincipal } from '@custos/auth';
import { NotFoundError, PermissionDeniedError, UnauthenticatedError } from '@custos/service-kit';
import {
  SECRET_TOKEN_PREFIXES,
  generateSecretToken,
  parseSecretToken,
  secretMatches,
} from '../credentials/secret-token-fns.js';
import { audit, auditRefusal } from '../audit/identity-audit.js';
import type { RevocationStore } from '../tokens/revocation-store.js';
import type { MintedAccessToken, TokenIssuer } from '../tokens/token-issuer.js';
import {
  type AgentSettings,
  DEFAULT_AGENT_SETTINGS,
  effectiveSettings,
  parseAgentInput,
} from './agent-fns.js';
import { agentInOrg, agentManager } from './agent-access.js';
import type { AgentPeers } from './agent-limits.js';
import type { AgentRow, AgentStore } from './agent-store.js';

const KEY_PREFIX = SECRET_TOKEN_PREFIXES.agentApiKey;
/** Every refused key exchange answers this, whatever the reason. */
const EXCHANGE_FAILED = 'invalid agent credentials';
/** Agent tokens live at most a day, so a subject revocation needs to outlive them by that much. */
const MAX_AGENT_TOKEN_MS = 86_400_000;

/** The HTTP view of an agent (spec §2.4 and the reference's AgentResponse). */
export function agentView(row: AgentRow): Record<string, unknown> {
  return {
    id: row.id,
    org_id: row.orgId,
    name: row.name,
    description: row.description,
    auth_method: 'api_key',
    is_active: row.isActive,
    created_by: row.createdBy,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
    last_active_at: row.lastActiveAt?.toISOString() ?? null,
    ...effectiveSettings(row.settings),
  };
}

/** What an agent sees of itself (`GET /v1/agents/me`). */
export function agentSelfView(row: AgentRow): Record<string, unknown> {
  const s = effectiveSettings(row.settings);
  return {
    id: row.id,
    org_id: row.orgId,
    name: row.name,
    description: row.description,
    scopes: s.scopes ?? [],
    is_active: row.isActive,
    intents_api_enabled: s.intents_api_enabled,
    environment: s.environment,
    created_by: row.createdBy,
    created_at: row.createdAt.toISOString(),
    expires_at: s.api_key_expires_at,
    last_active_at: row.lastActiveAt?.toISOString() ?? null,
  };
}

/** Registration, settings, deactivation and key rotation of agents, and the key-for-token exchange. */
export class AgentService {
  constructor(
    private readonly store: AgentStore,
    private readonly issuer: TokenIssuer,
    private readonly revocations: RevocationStore,
    private readonly peers: AgentPeers,
  ) {}

  private manager(p: Principal): UserPrincipal {
    return agentManager(p);
  }

  private inOrg(p: Principal, agentId: string): Promise<AgentRow> {
    return agentInOrg(this.store, p, agentId);
  }

  /** Registers an agent in the caller's org; the API key is returned once. */
  async create(
    p: Principal,
    fields: Record<string, unknown>,
  ): Promise<{ agent: Record<string, unknown>; apiKey: string }> {
    const user = this.manager(p);
    const input = parseAgentInput(fields, 'create');
    const key = generateSecretToken(KEY_PREFIX);
    const cap = await this.peers.agentCap(user.orgId);
    const row = await this.store.transaction(async (tx) => {
      await this.peers.reserveActiveAgent(this.store, tx, user.orgId, cap.maxAgents, cap.plan);
      const created = await this.store.insert(
        {
          orgId: user.orgId,
          name: input.name!,
          description: input.description ?? '',
          settings: { ...DEFAULT_AGENT_SETTINGS, ...input.settings },
          createdBy: user.userId,
        },
        tx,
      );
      await this.store.insertKey({ id: key.id, agentId: created.id, secretHash: key.secretHash }, tx);
      await audit(tx, {
        orgId: user.orgId,
        actorType: 'user',
        actorId: user.userId,
        action: 'agent.created',
        resourceType: 'agent',
        resourceId: created.id,
        metadata: { fields: Object.keys(fields).sort() },
      });
      return created;
    });
    return { agent: agentView(row), apiKey: key.token };
  }

  /** The agents of the caller's org. */
  async list(p: Principal): Promise<Record<string, unknown>[]> {
    if (p.kind !== 'user') throw new PermissionDeniedError('agents cannot list agents');
    return (await this.store.listInOrg(p.orgId)).map(agentView);
  }

  /** One agent of the caller's org; an agent may read only itself. */
  async get(p: Principal, agentId: string): Promise<Record<string, unknown>> {
    if (p.kind === 'agent' && p.agentId !== agentId.toLowerCase()) throw new NotFoundError('agent', agentId);
    return agentView(await this.inOrg(p, agentId));
  }

  /** Changes the fields present; a change of scopes, vaults or flags applies to tokens minted next. */
  async update(
    p: Principal,
    agentId: string,
    fields: Record<string, unknown>,
  ): Promise<Record<string, unknown>> {
    const user = this.manager(p);
    const row = await this.inOrg(p, agentId);
    const input = parseAgentInput(fields, 'update');
    const settings: AgentSettings = { ...effectiveSettings(row.settings), ...input.settings };
    const change = {
      ...(input.name !== undefined ? { name: input.name } : {}),
      ...(input.description !== undefined ? { description: input.description } : {}),
      ...(input.isActive !== undefined ? { isActive: input.isActive } : {}),
      settings,
    };
    const reactivating = input.isActive === true && !row.isActive;
    const deactivating = input.isActive === false && row.isActive;
    // Reactivating takes a place under the org's cap on active agents, like creating does.
    const cap = reactivating ? await this.peers.agentCap(row.orgId) : undefined;
    const { updated, revoked } = await this.store.transaction(async (tx) => {
      if (cap) await this.peers.reserveActiveAgent(this.store, tx, row.orgId, cap.maxAgents, cap.plan);
      const next = await this.store.update(row.id, change, tx);
      const base = { orgId: row.orgId, actorType: 'user' as const, actorId: user.userId };
      const target = { resourceType: 'agent', resourceId: row.id };
      // Field names only: values (scopes, vaults, limits) are in the agent itself.
      await audit(tx, {
        ...base,
        ...target,
        action: 'agent.updated',
        metadata: { fields: Object.keys(fields).sort() },
      });
      if (reactivating) await audit(tx, { ...base, ...target, action: 'agent.activated' });
      if (!deactivating) return { updated: next, revoked: [] };
      // Deactivating through PATCH is the same as DELETE: keys and tokens stop at once.
      const keyIds = await this.store.revokeKeys(row.id, tx);
      await audit(tx, { ...base, ...target, action: 'agent.deactivated', metadata: { via: 'update' } });
      return { updated: next, revoked: keyIds };
    });
    await this.revokeTokensOf(revoked);
    return agentView(updated);
  }

  /** Deactivates an agent: its keys and every token it holds stop working at once. */
  async deactivate(p: Principal, agentId: string): Promise<void> {
    const user = this.manager(p);
    const row = await this.inOrg(p, agentId);
    const revoked = await this.store.transaction(async (tx) => {
      await this.store.update(row.id, { isActive: false }, tx);
      const keyIds = await this.store.revokeKeys(row.id, tx);
      await audit(tx, {
        orgId: row.orgId,
        actorType: 'user',
        actorId: user.userId,
        action: 'agent.deactivated',
        resourceType: 'agent',
        resourceId: row.id,
        metadata: { via: 'delete', was_active: row.isActive },
      });
      return keyIds;
    });
    await this.revokeTokensOf(revoked);
  }

  /** The calling agent's own profile. */
  async self(p: Principal): Promise<Record<string, unknown>> {
    if (p.kind !== 'agent') throw new PermissionDeniedError('this endpoint is for agents');
    const row = await this.store.findById(p.agentId);
    if (!row || !row.isActive) throw new UnauthenticatedError();
    return agentSelfView(row);
  }

  /** Issues a new key; the previous key and the tokens minted from it stop working. */
  async rotateKey(p: Principal, agentId: string): Promise<string> {
    const user = this.manager(p);
    const row = await this.inOrg(p, agentId);
    const key = generateSecretToken(KEY_PREFIX);
    const revoked = await this.store.transaction(async (tx) => {
      const ids = await this.store.revokeKeys(row.id, tx);
      await this.store.insertKey({ id: key.id, agentId: row.id, secretHash: key.secretHash }, tx);
      await audit(tx, {
        orgId: row.orgId,
        actorType: 'user',
        actorId: user.userId,
        action: 'agent.key_rotated',
        resourceType: 'agent',
        resourceId: row.id,
        metadata: { revoked_keys: ids.length },
      });
      return ids;
    });
    await this.revokeTokensOf(revoked);
    return key.token;
  }

  /** Exchanges an `ocv_` key (with the agent id, or the key alone) for an agent JWT. */
  async exchange(agentId: string, apiKey: string): Promise<MintedAccessToken> {
    const parsed = parseSecretToken(apiKey, KEY_PREFIX);
    if (!parsed) throw new UnauthenticatedError(EXCHANGE_FAILED);
    const key = await this.store.findLiveKey(parsed.id);
    if (!key) throw new UnauthenticatedError(EXCHANGE_FAILED);
    // From here the key names a known agent: a refusal is recorded under the agent's org.
    if (!secretMatches(parsed.secret, key.secretHash)) return this.refuse(key.agentId, 'wrong_secret');
    if (agentId && agentId.toLowerCase() !== key.agentId) return this.refuse(key.agentId, 'agent_mismatch');
    const row = await this.store.findById(key.agentId);
    if (!row?.isActive) return this.refuse(key.agentId, 'agent_inactive');
    const s = effectiveSettings(row.settings);
    if (s.api_key_expires_at && Date.parse(s.api_key_expires_at) <= Date.now())
      return this.refuse(key.agentId, 'key_expired');
    // A token never outlives the key it came from (spec §5.5).
    const untilKeyExpiry = s.api_key_expires_at
      ? Math.max(1, Math.floor((Date.parse(s.api_key_expires_at) - Date.now()) / 1000))
      : Infinity;
    const access = await this.peers.tokenAccess(row, s);
    // Minted first, handed out only once the sign-in and its audit record are committed.
    const minted = this.issuer.agentAccessToken({
      id: row.id,
      keyId: key.id,
      orgId: row.orgId,
      createdBy: row.createdBy,
      ...access,
      intentsApiEnabled: s.intents_api_enabled,
      proxyEnabled: s.proxy_enabled,
      proxyConfig: s.proxy_config,
      environment: s.environment,
      ttlSeconds: Math.min(s.token_ttl_seconds, untilKeyExpiry),
    });
    await this.store.transaction(async (tx) => {
      await this.store.update(row.id, { lastActiveAt: new Date() }, tx);
      await audit(tx, {
        orgId: row.orgId,
        actorType: 'agent',
        actorId: row.id,
        action: 'auth.login',
        resourceType: 'agent',
        resourceId: row.id,
        metadata: { method: 'agent_api_key', expires_in: minted.expiresIn },
      });
    });
    return minted;
  }

  /** Refuses a key exchange of a known agent with the one 401, after recording it under its org. */
  private async refuse(agentId: string, reason: string): Promise<never> {
    const agent = await this.store.findById(agentId);
    if (agent) {
      await auditRefusal(this.store, {
        orgId: agent.orgId,
        actorType: 'anonymous',
        actorId: null,
        action: 'auth.login_failed',
        resourceType: 'agent',
        resourceId: agent.id,
        metadata: { method: 'agent_api_key', reason },
      });
    }
    throw new UnauthenticatedError(EXCHANGE_FAILED);
  }

  /** Agent tokens carry the id of the key they were exchanged for (`sid`): revoking it ends them. */
  private async revokeTokensOf(keyIds: string[]): Promise<void> {
    const until = new Date(Date.now() + MAX_AGENT_TOKEN_MS);
    for (const id of keyIds) await this.revocations.revokeSession(id, until);
  }
}
