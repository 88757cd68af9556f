import type { ChainAdapter } from '../../keys/chain-adapter.js';

/** The Solana adapter (being written): undefined until then, so the registry leaves the family out. */
export const solanaAdapter: ChainAdapter | undefined = undefined;
