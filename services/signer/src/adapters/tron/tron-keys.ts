import { SigningKey, computeAddress, hexlify } from 'ethers';
import { TronWeb } from 'tronweb';
import type { GeneratedKey } from '../../keys/chain-adapter.js';
import { randomSecp256k1PrivateKey } from '../../keys/secp256k1.js';

/** Tron's address prefix byte (every network: mainnet, Nile, Shasta). */
export const TRON_ADDRESS_PREFIX = '41';

/** The public key (uncompressed, `0x04…`) and base58check `T…` address of a 32-byte private key. */
export function deriveTron(privateKey: Buffer): { publicKey: string; address: string } {
  if (privateKey.length !== 32) throw new Error('a Tron private key is 32 bytes');
  const k = new SigningKey(hexlify(privateKey));
  return { publicKey: k.publicKey, address: tronAddressOfPublicKey(k.publicKey) };
}

/** The `T…` address of an uncompressed secp256k1 public key: 0x41 ‖ keccak256(pub)[12..32], base58check. */
export function tronAddressOfPublicKey(publicKey: string): string {
  const evm = computeAddress(publicKey);
  return TronWeb.address.fromHex(`${TRON_ADDRESS_PREFIX}${evm.slice(2).toLowerCase()}`);
}

/** A fresh random key pair. */
export function generateTron(): GeneratedKey {
  const privateKey = randomSecp256k1PrivateKey();
  return { privateKey, ...deriveTron(privateKey) };
}

/**
 * True for a base58check `T…` address (34 characters, checksum and 0x41 prefix checked by
 * tronweb). The hex form (`41…`) is refused: agents give the form wallets show, and a hex string
 * is too easily an address of another chain.
 */
export function isTronAddress(address: string): boolean {
  return /^T[1-9A-HJ-NP-Za-km-z]{33}$/.test(address) && TronWeb.isAddress(address);
}

/** The hex form (`41` + 20 bytes, lower case) of a base58 `T…` address. */
export function tronHex(address: string): string {
  return TronWeb.address.toHex(address).toLowerCase();
}

/** The base58 `T…` form of a hex (`41…`) address. */
export function tronBase58(hex: string): string {
  return TronWeb.address.fromHex(hex.toLowerCase());
}
