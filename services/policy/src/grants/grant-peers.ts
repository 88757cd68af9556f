import { Metadata } from '@grpc/grpc-js';
import type { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import type { OrgServiceClient } from '@custos/proto/custos/identity/v1/orgs';
import type { VaultCryptoServiceClient } from '@custos/proto/custos/vault_crypto/v1/service';
import { CustosError, callUnary } from '@custos/service-kit';
import type { PrincipalType } from './grant-types.js';

/** Who owns a vault, as vault-crypto tells it. */
export interface VaultOwner {
  vaultId: string;
  orgId: string;
  createdBy: string;
  createdByType: string;
  isSystem: boolean;
}

/**
 * What the policy service asks its peers while grants are managed. Every call carries the
 * caller's JWT (the client interceptor forwards it), so each peer answers for the caller's org.
 */
export class GrantPeers {
  constructor(
    private readonly vaultCrypto: VaultCryptoServiceClient,
    private readonly identity: IdentityServiceClient,
    private readonly orgs: OrgServiceClient,
  ) {}

  /** The vault's owner; another org's vault or an unknown id is 404 (vault-crypto decides). */
  async vault(vaultId: string): Promise<VaultOwner> {
    const r = await callUnary(this.vaultCrypto, this.vaultCrypto.describeVault, { vaultId }, new Metadata());
    return {
      vaultId: r.vaultId,
      orgId: r.orgId,
      createdBy: r.createdBy,
      createdByType: r.createdByType,
      isSystem: r.isSystem,
    };
  }

  /** Whether the caller's org has this user (a member) or agent. */
  async principalExists(type: PrincipalType, id: string): Promise<boolean> {
    if (type === 'agent') {
      try {
        await callUnary(this.identity, this.identity.getAgent, { agentId: id }, new Metadata());
        return true;
      } catch (err) {
        if (err instanceof CustosError && err.kind === 'not_found') return false;
        throw err;
      }
    }
    const r = await callUnary(this.orgs, this.orgs.listOrgMembers, {}, new Metadata());
    return r.members.some((m) => m.id.toLowerCase() === id);
  }
}
