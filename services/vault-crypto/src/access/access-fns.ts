import { type Principal, isCreator, isCreatorOrAdmin } from '@custos/auth';

/** The vault facts the access rules read. */
export interface OwnedVault {
  id: string;
  createdBy: string;
  createdByType: string;
}

/** Whether the principal created the vault (its owner). */
export function ownsVault(p: Principal, v: OwnedVault): boolean {
  return isCreator(p, v);
}

/** Whether the principal holds the vault without asking policy: its owner, or an org owner/admin. */
export function managesVault(p: Principal, v: OwnedVault): boolean {
  return isCreatorOrAdmin(p, v);
}

/**
 * Whether an agent may see a vault at all: its own, or one its token names in `vault_ids` (the
 * vaults its grants were on when the token was minted).
 */
export function agentSeesVault(p: Principal, v: OwnedVault): boolean {
  return p.kind !== 'agent' || ownsVault(p, v) || p.vaultIds.includes(v.id);
}
