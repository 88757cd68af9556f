import type { ChainAdapter } from '../../keys/chain-adapter.js';
import { deriveXrpKey, generateXrpKey, isXrpAddress, xrpAddressFor } from './xrp-keys.js';
import { xrpTransfers } from './xrp-transfer.js';

/**
 * XRP Ledger keys and transfers: Ed25519 keys (xrpl.js's default; private key = the 32-byte
 * Ed25519 secret, public key `ED` + 32 bytes hex), classic `r…` addresses (the same on every
 * network), native XRP Payments over rippled's JSON-RPC.
 */
export const xrpAdapter: ChainAdapter | undefined = {
  family: 'xrp',
  curve: 'ed25519',
  generate: generateXrpKey,
  derive: deriveXrpKey,
  addressFor: (key) => xrpAddressFor(key),
  isAddress: isXrpAddress,
  transfers: xrpTransfers as ChainAdapter['transfers'],
};
