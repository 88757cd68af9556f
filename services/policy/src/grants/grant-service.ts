import {
  type Principal,
  type UserPrincipal,
  isCreatorOrAdmin,
  requireHuman,
  requireHumanAdmin,
} from '@custos/auth';
import { writeEvent } from '@custos/events';
import type { StoredRule } from '@custos/approval-rules';
import {
  ConflictError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  type Transaction,
  isUuid,
} from '@custos/service-kit';
import { grantAudit, writePolicyAudit } from '../audit/policy-audit.js';
import { outbox } from '../db/schema.js';
import { agentScopes, decide } from './decide-fns.js';
import { changedFields, checkGrantChange, checkGrantInput, grantEventData } from './grant-fns.js';
import type { GrantStore } from './grant-store.js';
import {
  type Decision,
  type DecisionPrincipal,
  type GrantChangeRequest,
  type GrantRecord,
  type GrantRequest,
  PERMISSIONS,
  type Permission,
  type VaultFacts,
} from './grant-types.js';

/** The most consensus triggers one agent's grants may carry (an agent's own policy takes 50 rules). */
export const MAX_TRIGGERS_PER_AGENT = 50;

/**
 * A consensus trigger decides who must agree before an agent signs: only org owners and admins set,
 * change or remove one (the gateway has checked their step-up), as for the agent's own rules.
 */
function requireTriggerAdmin(p: UserPrincipal): void {
  requireHumanAdmin(p, "set, change or remove a policy's consensus_trigger");
}

/**
 * Grants (SPEC §2.3) and access decisions. Managing a vault's grants is for humans only: an owner
 * or admin of the vault's org, or the user who created the vault. Who owns the vault and whether a
 * grant's principal is in the org arrive as facts in the request (see VaultFacts): this service
 * calls no other. Each change writes its `policy.*` event and its `policy.*` audit record in the
 * same transaction.
 */
export class GrantService {
  constructor(
    private readonly store: GrantStore,
    private readonly clock: () => Date = () => new Date(),
    /**
     * Told after each committed change of an org's grants, before the change is answered: bumps the
     * org's decision generation, so cached decisions of the org stop counting (DecisionGeneration).
     */
    private readonly changed: (orgId: string) => Promise<void> = async () => undefined,
  ) {}

  private manage(p: Principal, vault: VaultFacts): UserPrincipal {
    requireHuman(p, 'manage policies');
    if (!isUuid(vault.vaultId) || vault.orgId !== p.orgId) throw new NotFoundError('vault', vault.vaultId);
    if (vault.isSystem) throw new PermissionDeniedError('system vaults have no policies');
    if (!isCreatorOrAdmin(p, vault)) {
      throw new PermissionDeniedError(
        'only an org owner or admin, or the vault creator, may manage its policies',
      );
    }
    return p;
  }

  /**
   * Adds a grant on a vault; its principal must be a member or an agent of the vault's org
   * (`principalInOrg`, as identity told the caller).
   */
  async create(
    p: Principal,
    vault: VaultFacts,
    request: GrantRequest,
    principalInOrg: boolean,
  ): Promise<GrantRecord> {
    const caller = this.manage(p, vault);
    const input = checkGrantInput(request, this.clock());
    if (input.consensusTrigger) requireTriggerAdmin(caller);
    if (!principalInOrg) {
      throw new InvalidArgumentError(
        'principal_id',
        `principal_id does not name ${input.principalType === 'agent' ? 'an agent' : 'a member'} of this org`,
      );
    }
    const created = await this.store.transaction(async (tx) => {
      if (input.consensusTrigger) await this.roomForTrigger(tx, vault.orgId, input.principalId);
      const row = await this.store.insert(
        { ...input, orgId: vault.orgId, vaultId: vault.vaultId, createdBy: caller.userId },
        tx,
      );
      await writeEvent(tx, outbox, {
        name: 'policy.created',
        orgId: row.orgId,
        data: grantEventData(row, caller.userId),
      });
      await writePolicyAudit(tx, grantAudit(caller, 'policy.created', row));
      return row;
    });
    await this.changed(created.orgId);
    return created;
  }

  /**
   * Refuses (409) a trigger past MAX_TRIGGERS_PER_AGENT on the agent: counted under a transaction
   * lock on the agent, so parallel creations cannot pass it together.
   */
  private async roomForTrigger(tx: Transaction, orgId: string, agentId: string): Promise<void> {
    const n = await this.store.countTriggers(tx, orgId, agentId);
    if (n >= MAX_TRIGGERS_PER_AGENT)
      throw new ConflictError(
        `the agent's policies carry ${MAX_TRIGGERS_PER_AGENT} consensus triggers already; remove one first`,
        'consensus_trigger',
      );
  }

  /** A vault's grants, expired ones included, oldest first. */
  async list(p: Principal, vault: VaultFacts): Promise<GrantRecord[]> {
    this.manage(p, vault);
    return this.store.listByVault(vault.orgId, vault.vaultId);
  }

  private async existing(vault: VaultFacts, policyId: string): Promise<GrantRecord> {
    const g = isUuid(policyId)
      ? await this.store.get(vault.orgId, vault.vaultId, policyId.toLowerCase())
      : undefined;
    if (!g) throw new NotFoundError('policy', policyId);
    return g;
  }

  /** Changes the fields present and resets the cleared ones. */
  async update(
    p: Principal,
    vault: VaultFacts,
    policyId: string,
    request: GrantChangeRequest,
  ): Promise<GrantRecord> {
    const caller = this.manage(p, vault);
    const before = await this.existing(vault, policyId);
    const change = checkGrantChange(request, before.principalType, this.clock());
    const changed = changedFields(change);
    if (changed.length === 0) return before;
    if (change.consensusTrigger !== undefined) requireTriggerAdmin(caller);
    const updated = await this.store.transaction(async (tx) => {
      if (change.consensusTrigger && !before.consensusTrigger)
        await this.roomForTrigger(tx, vault.orgId, before.principalId);
      const row = await this.store.update(vault.orgId, vault.vaultId, before.id, change, tx);
      if (!row) throw new NotFoundError('policy', policyId);
      await writeEvent(tx, outbox, {
        name: 'policy.updated',
        orgId: row.orgId,
        data: grantEventData(row, caller.userId, changed),
      });
      await writePolicyAudit(tx, grantAudit(caller, 'policy.updated', row, changed));
      return row;
    });
    await this.changed(updated.orgId);
    return updated;
  }

  /** Removes a grant. */
  async delete(p: Principal, vault: VaultFacts, policyId: string): Promise<void> {
    const caller = this.manage(p, vault);
    const before = await this.existing(vault, policyId);
    if (before.consensusTrigger) requireTriggerAdmin(caller);
    await this.store.transaction(async (tx) => {
      const row = await this.store.delete(vault.orgId, vault.vaultId, before.id, tx);
      if (!row) throw new NotFoundError('policy', policyId);
      await writeEvent(tx, outbox, {
        name: 'policy.deleted',
        orgId: row.orgId,
        data: grantEventData(row, caller.userId),
      });
      await writePolicyAudit(tx, grantAudit(caller, 'policy.deleted', row));
    });
    await this.changed(vault.orgId);
  }

  /** Whether the principal may perform `permission` on `path` of the vault: one indexed read. */
  async decide(
    p: DecisionPrincipal,
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
      request.vaultOrgId,
      request.vaultId,
      principal.principalType,
      principal.principalId,
      now,
    );
    return decide(grants, request);
  }

  /**
   * The consensus triggers of an agent's grants, oldest grant first (signer adds them to the
   * agent's action_approval_policy before matching a transaction or sign intent).
   */
  async agentApprovalRules(
    orgId: string,
    agentId: string,
  ): Promise<Array<{ policyId: string; vaultId: string; rule: StoredRule }>> {
    if (!isUuid(orgId)) throw new InvalidArgumentError('org_id', 'org_id must be a UUID');
    if (!isUuid(agentId)) throw new InvalidArgumentError('agent_id', 'agent_id must be a UUID');
    const rows = await this.store.triggersOfAgent(orgId.toLowerCase(), agentId.toLowerCase());
    return rows.flatMap((g) =>
      g.consensusTrigger ? [{ policyId: g.id, vaultId: g.vaultId, rule: g.consensusTrigger }] : [],
    );
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
