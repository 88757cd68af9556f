/** The chain families the registry knows; the family decides keys and addresses. */
export const CHAIN_FAMILIES = ['evm', 'bitcoin', 'solana', 'xrp', 'cardano', 'tron'] as const;

/** One chain family. */
export type ChainFamily = (typeof CHAIN_FAMILIES)[number];

/** A chain of the registry. */
export interface ChainRecord {
  id: string;
  name: string;
  displayName: string;
  chainId: bigint;
  family: ChainFamily;
  rpcUrl: string;
  wsUrl: string;
  explorerUrl: string;
  nativeCurrency: string;
  nativeDecimals: number;
  isTestnet: boolean;
  isEnabled: boolean;
  createdAt: Date;
  updatedAt: Date;
}

/** A chain to add (checked). */
export type NewChain = Omit<ChainRecord, 'id' | 'createdAt' | 'updatedAt'>;

/** A change to a chain: the fields present are set (checked). */
export type ChainChange = Partial<
  Pick<
    ChainRecord,
    'displayName' | 'rpcUrl' | 'wsUrl' | 'explorerUrl' | 'nativeCurrency' | 'isTestnet' | 'isEnabled'
  >
>;

/** How a caller names a chain: its entry UUID, its numeric chain id, or its name. */
export type ChainIdentifier =
  | { kind: 'uuid'; id: string }
  | { kind: 'number'; chainId: bigint }
  | { kind: 'name'; name: string };
