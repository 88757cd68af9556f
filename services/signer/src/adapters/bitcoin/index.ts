import type { ChainAdapter, TransferOps } from '../../keys/chain-adapter.js';
import { bitcoinAddressFor, deriveBitcoinKey, generateBitcoinKey, isBitcoinAddress } from './bitcoin-keys.js';
import { bitcoinTransfers } from './bitcoin-transfer.js';

/**
 * Bitcoin: one secp256k1 key per agent (compressed public key), P2WPKH addresses (`bc1q…`
 * stored; `tb1q…` on testnet/signet, `bcrt1q…` on regtest), native transfers built as PSBTs from
 * the key's confirmed UTXOs over an Esplora API.
 */
export const bitcoinAdapter: ChainAdapter | undefined = {
  family: 'bitcoin',
  curve: 'secp256k1',
  generate: generateBitcoinKey,
  derive: deriveBitcoinKey,
  addressFor: bitcoinAddressFor,
  isAddress: isBitcoinAddress,
  transfers: bitcoinTransfers as TransferOps,
};
