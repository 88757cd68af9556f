import type { ChainFamily } from '../chains/chain-types.js';

/** The custody labels of SPEC §2.8. */
export const CUSTODY_LABELS = ['server', 'client_tss', 'passkey_owner'] as const;

/** One custody label. */
export type Custody = (typeof CUSTODY_LABELS)[number];

/** One stored version of an agent's signing key (public half). */
export interface SigningKeyRecord {
  id: string;
  orgId: string;
  agentId: string;
  family: ChainFamily;
  curve: string;
  publicKey: string;
  address: string;
  keyVersion: number;
  custody: Custody;
  isActive: boolean;
  vaultSecretId: string;
  createdBy: string;
  createdAt: Date;
  rotatedAt: Date | null;
}
