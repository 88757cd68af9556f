import type { ChainAdapter, TransferOps } from '../../keys/chain-adapter.js';
import { deriveSolana, generateSolana, isSolanaAddress, solanaAddressFor } from './solana-keys.js';
import { solanaTransfers } from './solana-transfer.js';

/**
 * Solana: ed25519 keys (the private key is the 32-byte seed), base58 public key = address on every
 * cluster; SOL and SPL Token transfers over the JSON-RPC API (solana-transfer.ts).
 */
export const solanaAdapter: ChainAdapter = {
  family: 'solana',
  curve: 'ed25519',
  generate: generateSolana,
  derive: deriveSolana,
  addressFor: (key) => solanaAddressFor(key),
  isAddress: (address) => isSolanaAddress(address),
  transfers: solanaTransfers as TransferOps,
};
