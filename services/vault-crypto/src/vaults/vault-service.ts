import { type Principal, type StepUpClient, actorOf, requireHumanAdmin } from '@custos/auth';
import {
  ConflictError,
  NotFoundError,
  PermissionDeniedError,
  ResourceLimitExceededError,
  isUuid,
} from '@custos/service-kit';
import { managesVault } from '../access/access-fns.js';
import type { AccessService } from '../access/access-service.js';
import type { VaultCryptoAudit } from '../audit/vault-crypto-audit.js';
import type { OrgKeyRing } from '../keys/org-key-ring.js';
import type { BillingClient } from '../peers/billing-client.js';
import { vaultDescription, vaultName } from './vault-fns.js';
import type { VaultRow, VaultStore } from './vault-store.js';
import type { VaultRequest } from './vault-types.js';

/** The step-up purpose of the org key's rotation (identity's `org.encryption_key.rotate`). */
export const ORG_KEY_ROTATE_PURPOSE = 'org.encryption_key.rotate';

/** Vault rules: names, visibility, ownership, the tier cap, and the org key's rotation. */
export class VaultService {
  private readonly orgsWithSystemVaults = new Set<string>();

  constructor(
    private readonly store: VaultStore,
    private readonly access: AccessService,
    private readonly limits: Pick<BillingClient, 'limitsOf'>,
    private readonly ring: OrgKeyRing,
    private readonly audit: VaultCryptoAudit,
    private readonly stepUp: Pick<StepUpClient, 'confirm'>,
  ) {}

  /** Creates a vault in the caller's org. */
  async create(p: Principal, input: VaultRequest): Promise<VaultRow> {
    const name = vaultName(input.name);
    const description = vaultDescription(input.description);
    await this.ensureSystemVaults(p.orgId);
    const limits = await this.limits.limitsOf(p.orgId);
    const actor = actorOf(p);
    const r = await this.audit.failClosed('vault.created', () =>
      this.store.create(
        { orgId: p.orgId, name, description, createdBy: actor.actorId, createdByType: actor.actorType },
        limits.maxVaults,
        (tx, vault) => this.audit.by(p, 'vault.created', { type: 'vault', id: vault.id }, { name })(tx),
      ),
    );
    if ('refused' in r) {
      if (r.refused === 'cap') throw new ResourceLimitExceededError('vaults', limits.maxVaults, limits.plan);
      throw new ConflictError(`a vault named ${JSON.stringify(name)} already exists`, 'name');
    }
    return r.vault;
  }

  /** The vaults the caller may see. */
  async list(p: Principal): Promise<VaultRow[]> {
    await this.ensureSystemVaults(p.orgId);
    if (p.kind === 'agent') return this.store.list(p.orgId, { ids: p.vaultIds, ownerId: p.agentId });
    return this.store.list(p.orgId);
  }

  /** One vault the caller may see (404 otherwise, 403 for a system vault). */
  async get(p: Principal, id: string): Promise<VaultRow> {
    const v = isUuid(id) ? await this.store.get(id) : undefined;
    return this.access.visible(p, v, id);
  }

  /** A vault of the caller's org for a peer's question, system vaults included. */
  async describe(p: Principal, id: string): Promise<VaultRow> {
    await this.ensureSystemVaults(p.orgId);
    const v = isUuid(id) ? await this.store.get(id) : undefined;
    if (!v || v.orgId !== p.orgId) throw new NotFoundError('vault', id);
    return v;
  }

  /** Deletes a vault: its creator or an org owner/admin only. */
  async delete(p: Principal, id: string): Promise<void> {
    const v = await this.get(p, id);
    if (!managesVault(p, v))
      throw new PermissionDeniedError('only the vault creator or an org admin may delete it');
    const audit = this.audit.by(p, 'vault.deleted', { type: 'vault', id: v.id }, { name: v.name });
    const done = await this.audit.failClosed('vault.deleted', () => this.store.delete(v.id, audit));
    if (!done) throw new NotFoundError('vault', id);
  }

  /**
   * Starts a new version of the caller's org key-encryption key (org owners and admins), after the
   * step-up `org.encryption_key.rotate`, which identity checks (a `rat_` token, the password or a
   * TOTP code): vault-crypto asks it itself rather than trusting the gateway's check.
   */
  async rotateOrgKey(p: Principal, credential: string): Promise<number> {
    requireHumanAdmin(p, 'rotate the org key');
    await this.stepUp.confirm(p, ORG_KEY_ROTATE_PURPOSE, credential);
    const version = await this.ring.rotate(p.orgId);
    await this.audit.now(p, 'org_key.rotated', { type: 'org_key', id: p.orgId }, { kek_version: version });
    return version;
  }

  private async ensureSystemVaults(orgId: string): Promise<void> {
    if (this.orgsWithSystemVaults.has(orgId)) return;
    await this.store.ensureSystemVaults(orgId);
    this.orgsWithSystemVaults.add(orgId);
  }
}
