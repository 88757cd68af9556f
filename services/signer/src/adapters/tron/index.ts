import type { ChainAdapter, KeyView } from '../../keys/chain-adapter.js';
import { deriveTron, generateTron, isTronAddress } from './tron-keys.js';
import { tronTransfers } from './tron-transfer.js';

/**
 * Tron: secp256k1 keys (uncompressed `0x04…` public key), base58check `T…` addresses (the same on
 * mainnet, Nile and Shasta), TRX and TRC-20 transfers over a full node's HTTP API.
 */
export const tronAdapter: ChainAdapter = {
  family: 'tron',
  curve: 'secp256k1',
  generate: generateTron,
  derive: deriveTron,
  // One address form on every Tron network.
  addressFor: (key: KeyView) => key.address,
  isAddress: (address: string) => isTronAddress(address),
  transfers: tronTransfers,
};
