import type { ChainAdapter } from '../../keys/chain-adapter.js';

/** The Tron adapter (being written): undefined until then, so the registry leaves the family out. */
export const tronAdapter: ChainAdapter | undefined = undefined;
