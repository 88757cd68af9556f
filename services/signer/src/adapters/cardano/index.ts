import type { ChainAdapter, TransferOps } from '../../keys/chain-adapter.js';
import { cardanoAddressFor, deriveCardano, generateCardano, isCardanoAddress } from './cardano-keys.js';
import { cardanoTransfers } from './cardano-transfer.js';

/** Cardano: ed25519 payment keys, enterprise addresses (`addr1…` / `addr_test1…`), ADA through Blockfrost. */
export const cardanoAdapter: ChainAdapter = {
  family: 'cardano',
  curve: 'ed25519',
  generate: generateCardano,
  derive: deriveCardano,
  addressFor: cardanoAddressFor,
  isAddress: isCardanoAddress,
  transfers: cardanoTransfers as TransferOps,
};
