import { createPrivateKey, createPublicKey, randomBytes } from 'node:crypto';
import { deriveAddress, isValidClassicAddress, isValidXAddress, xAddressToClassicAddress } from 'xrpl';
import { type KeyView, networkOf } from '../../keys/chain-adapter.js';
import type { ChainRecord } from '../../chains/chain-types.js';

/** The XRP Ledger networks signer knows by name (`xrp` is mainnet, `xrp-testnet`, `xrp-devnet`). */
export const XRP_NETWORKS = ['mainnet', 'testnet', 'devnet'] as const;
export type XrpNetwork = (typeof XRP_NETWORKS)[number];

/** The network of an XRP chain of the registry. */
export function xrpNetworkOf(chain: Pick<ChainRecord, 'name' | 'family' | 'isTestnet'>): XrpNetwork {
  return networkOf(chain, XRP_NETWORKS, 'testnet', 'mainnet');
}

// PKCS#8 wrapping of a raw 32-byte Ed25519 private key (RFC 8410), so node:crypto derives its public key.
const PKCS8_ED25519 = Buffer.from('302e020100300506032b657004220420', 'hex');

/**
 * The XRPL public key of a 32-byte Ed25519 private key: `ED` + the 32-byte public key, upper-case
 * hex, as rippled and ripple-keypairs write it.
 */
export function xrpPublicKeyOf(privateKey: Buffer): string {
  if (privateKey.length !== 32) throw new Error('an XRP Ledger Ed25519 private key is 32 bytes');
  const der = Buffer.concat([PKCS8_ED25519, privateKey]);
  try {
    const pub = createPublicKey(createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }));
    const raw = pub.export({ format: 'der', type: 'spki' }).subarray(-32);
    return `ED${raw.toString('hex').toUpperCase()}`;
  } finally {
    der.fill(0);
  }
}

/** Public key and classic address (the same on every network) of a private key. */
export function deriveXrpKey(privateKey: Buffer): { publicKey: string; address: string } {
  const publicKey = xrpPublicKeyOf(privateKey);
  return { publicKey, address: deriveAddress(publicKey) };
}

/** A fresh Ed25519 key: any 32 random bytes are a valid Ed25519 secret. */
export function generateXrpKey(): { privateKey: Buffer; publicKey: string; address: string } {
  const privateKey = randomBytes(32);
  return { privateKey, ...deriveXrpKey(privateKey) };
}

/** The key's address on the chain: XRPL classic addresses are the same on every network. */
export function xrpAddressFor(key: KeyView): string {
  return key.address;
}

/**
 * A classic address (checksum checked), or an X-address (XLS-5) of the chain's network: mainnet's
 * start with `X`, the test networks' with `T`.
 */
export function isXrpAddress(
  address: string,
  chain: Pick<ChainRecord, 'name' | 'family' | 'isTestnet'>,
): boolean {
  if (isValidClassicAddress(address)) return true;
  if (!isValidXAddress(address)) return false;
  return xAddressToClassicAddress(address).test === (xrpNetworkOf(chain) !== 'mainnet');
}
