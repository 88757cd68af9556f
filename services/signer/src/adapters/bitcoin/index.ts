import type { ChainAdapter } from '../../keys/chain-adapter.js';

/** The Bitcoin adapter (being written): undefined until then, so the registry leaves the family out. */
export const bitcoinAdapter: ChainAdapter | undefined = undefined;
