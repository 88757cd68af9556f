import type { ChainAdapter } from '../../keys/chain-adapter.js';

/** The Cardano adapter (being written): undefined until then, so the registry leaves the family out. */
export const cardanoAdapter: ChainAdapter | undefined = undefined;
