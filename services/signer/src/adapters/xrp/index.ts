import type { ChainAdapter } from '../../keys/chain-adapter.js';

/** The Xrp adapter (being written): undefined until then, so the registry leaves the family out. */
export const xrpAdapter: ChainAdapter | undefined = undefined;
