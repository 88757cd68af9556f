import type { Principal, UserPrincipal } from '@custos/auth';
import { writeAudit, writeEvent } from '@custos/events';
import { InvalidArgumentError, NotFoundError, PermissionDeniedError, isUuid } from '@custos/service-kit';
import { outbox } from '../db/schema.js';
import { agentScopes, decide } from './decide-fns.js';
import {
  type GrantRecord,
  changedFields,
  grantAuditMetadata,
  grantEventData,
  grantView,
  parseGrantChange,
  parseGrantInput,
} from './grant-fns.js';
import type { GrantPeers, VaultOwner } from './grant-peers.js';
import type { GrantStore } from './grant-store.js';
import { type Decision, PERMISSIONS, type Permission } from './grant-types.js';

/** The audit record of a change to a grant (written in the change's transaction). */
function grantAudit(caller: UserPrincipal, action: string, g: GrantRecord, changed?: string[]) {
  return {
    orgId: g.orgId,
    actorType: 'user' as const,
    actorId: caller.userId,
    action,
    resourceType: 'policy',
    resourceId: g.id,
    metadata: grantAuditMetadata(g, changed),
  };
}

/** A vault whose grants the caller may manage, with the caller. */
interface Managed {
  caller: UserPrincipal;
  vault: VaultOwner;
}

/**
 * Grants (SPEC §2.3) and access decisions. Managing a vault's grants is for humans only: an owner
 * or admin of the vault's org, or the user who created the vault. Each change writes its
 * `policy.*` event and its `policy.*` audit record in the same transaction.
 */
export class GrantService {
  constructor(
    private readonly store: GrantStore,
    private readonly peers: GrantPeers,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  private async manage(p: Principal, vaultId: string): Promise<Managed> {
    if (p.kind !== 'user') throw new PermissionDeniedError('agents may not manage policies');
    if (!isUuid(vaultId)) throw new NotFoundError('vault', vaultId);
    const vault = await this.peers.vault(vaultId.toLowerCase());
    if (vault.orgId !== p.orgId) throw new NotFoundError('vault', vaultId);
    if (vault.isSystem) throw new PermissionDeniedError('system vaults have no policies');
    const creator = vault.createdByType === 'user' && vault.createdBy === p.userId;
    if (!creator && p.role !== 'owner' && p.role !== 'admin') {
      throw new PermissionDeniedError(
        'only an org owner or admin, or the vault creator, may manage its policies',
      );
    }
    return { caller: p, vault };
  }

  /** Adds a grant on a vault; its principal must be a member or an agent of the vault's org. */
  async create(
    p: Principal,
    vaultId: string,
    fields: Record<string, unknown>,
  ): Promise<Record<string, unknown>> {
    const { caller, vault } = await this.manage(p, vaultId);
    const input = parseGrantInput(fields, this.clock());
    if (!(await this.peers.principalExists(input.principalType, input.principalId))) {
      throw new InvalidArgumentError(
        'principal_id',
        `principal_id does not name ${input.principalType === 'agent' ? 'an agent' : 'a member'} of this org`,
      );
    }
    const g = await this.store.transaction(async (tx) => {
      const row = await this.store.insert(
        { ...input, orgId: vault.orgId, vaultId: vault.vaultId, createdBy: caller.userId },
        tx,
      );
      await writeEvent(tx, outbox, {
        name: 'policy.created',
        orgId: row.orgId,
        data: grantEventData(row, caller.userId),
      });
      await writeAudit(tx, outbox, grantAudit(caller, 'policy.created', row));
      return row;
    });
    return grantView(g);
  }

  /** A vault's grants, expired ones included, oldest first. */
  async list(p: Principal, vaultId: string): Promise<Record<string, unknown>[]> {
    const { vault } = await this.manage(p, vaultId);
    return (await this.store.listByVault(vault.vaultId)).map(grantView);
  }

  private async existing(vault: VaultOwner, policyId: string): Promise<GrantRecord> {
    const g = isUuid(policyId) ? await this.store.get(vault.vaultId, policyId.toLowerCase()) : undefined;
    if (!g) throw new NotFoundError('policy', policyId);
    return g;
  }

  /** Changes the fields present. */
  async update(
    p: Principal,
    vaultId: string,
    policyId: string,
    fields: Record<string, unknown>,
  ): Promise<Record<string, unknown>> {
    const { caller, vault } = await this.manage(p, vaultId);
    const before = await this.existing(vault, policyId);
    const change = parseGrantChange(fields, before.principalType, this.clock());
    const changed = changedFields(change);
    if (changed.length === 0) return grantView(before);
    const g = await this.store.transaction(async (tx) => {
      const row = await this.store.update(vault.vaultId, before.id, change, tx);
      if (!row) throw new NotFoundError('policy', policyId);
      await writeEvent(tx, outbox, {
        name: 'policy.updated',
        orgId: row.orgId,
        data: grantEventData(row, caller.userId, changed),
      });
      await writeAudit(tx, outbox, grantAudit(caller, 'policy.updated', row, changed));
      return row;
    });
    return grantView(g);
  }

  /** Removes a grant. */
  async delete(p: Principal, vaultId: string, policyId: string): Promise<void> {
    const { caller, vault } = await this.manage(p, vaultId);
    const before = await this.existing(vault, policyId);
    await this.store.transaction(async (tx) => {
      const row = await this.store.delete(vault.vaultId, before.id, tx);
      if (!row) throw new NotFoundError('policy', policyId);
      await writeEvent(tx, outbox, {
        name: 'policy.deleted',
        orgId: row.orgId,
        data: grantEventData(row, caller.userId),
      });
      await writeAudit(tx, outbox, grantAudit(caller, 'policy.deleted', row));
    });
  }

  /** Whether the caller may perform `permission` on `path` of the vault: one indexed read. */
  async decide(
    p: Principal,
    req: { vaultId: string; vaultOrgId: string; path: string; permission: string },
    clientIp: string | undefined,
  ): Promise<Decision> {
    if (!(PERMISSIONS as readonly string[]).includes(req.permission)) {
      throw new InvalidArgumentError('permission', 'permission must be read or write');
    }
    if (!isUuid(req.vaultId)) throw new InvalidArgumentError('vault_id', 'vault_id must be a UUID');
    const now = this.clock();
    const principal =
      p.kind === 'user'
        ? { principalType: 'user' as const, principalId: p.userId }
        : { principalType: 'agent' as const, principalId: p.agentId, environment: p.environment };
    const request = {
      ...principal,
      principalOrgId: p.orgId,
      clientIp,
      vaultId: req.vaultId.toLowerCase(),
      vaultOrgId: req.vaultOrgId.toLowerCase(),
      path: req.path,
      permission: req.permission as Permission,
      now,
    };
    if (request.principalOrgId !== request.vaultOrgId) return decide([], request);
    const grants = await this.store.forDecision(
      request.vaultId,
      principal.principalType,
      principal.principalId,
      now,
    );
    return decide(grants, request);
  }

  /**
   * The patterns and vaults of an agent's live allow grants. Identity asks without a caller; a
   * forwarded caller may ask only about its own org (and an agent only about itself).
   */
  async agentScopes(
    caller: Principal | undefined,
    orgId: string,
    agentId: string,
  ): Promise<{ scopes: string[]; vaultIds: string[] }> {
    if (!isUuid(orgId)) throw new InvalidArgumentError('org_id', 'org_id must be a UUID');
    if (!isUuid(agentId)) throw new InvalidArgumentError('agent_id', 'agent_id must be a UUID');
    if (caller && caller.orgId !== orgId.toLowerCase()) throw new NotFoundError('agent', agentId);
    if (caller?.kind === 'agent' && caller.agentId !== agentId.toLowerCase())
      throw new NotFoundError('agent', agentId);
    const now = this.clock();
    return agentScopes(
      await this.store.liveAllowsOfAgent(orgId.toLowerCase(), agentId.toLowerCase(), now),
      now,
    );
  }
}
