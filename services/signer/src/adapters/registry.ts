import type { ChainAdapter, ChainAdapters } from '../keys/chain-adapter.js';
import { evmAdapter } from '../keys/evm-adapter.js';
import { bitcoinAdapter } from './bitcoin/index.js';
import { cardanoAdapter } from './cardano/index.js';
import { solanaAdapter } from './solana/index.js';
import { tronAdapter } from './tron/index.js';
import { xrpAdapter } from './xrp/index.js';

/** Every family's adapter: adding a chain family is one folder here and one line below. */
export const CHAIN_ADAPTERS: ChainAdapters = Object.fromEntries(
  [evmAdapter, bitcoinAdapter, solanaAdapter, xrpAdapter, tronAdapter, cardanoAdapter]
    .filter((a): a is ChainAdapter => a !== undefined)
    .map((a) => [a.family, a]),
);
