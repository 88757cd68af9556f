import type { ChainRecord } from '../../chains/chain-types.js';
import type { GeneratedKey, KeyView } from '../../keys/chain-adapter.js';
import { randomSecp256k1PrivateKey } from '../../keys/secp256k1.js';
import { bitcoin, ecc, networkFor, standardScript } from './bitcoin-lib.js';

/** The public key (compressed, 33 bytes hex) and mainnet P2WPKH address of a private key. */
export function deriveBitcoinKey(privateKey: Buffer): { publicKey: string; address: string } {
  if (privateKey.length !== 32 || !ecc.isPrivate(privateKey)) {
    throw new Error('a Bitcoin private key is 32 bytes, an integer in [1, n-1]');
  }
  const pub = ecc.pointFromScalar(privateKey, true);
  if (!pub) throw new Error('a Bitcoin private key is 32 bytes, an integer in [1, n-1]');
  return {
    publicKey: Buffer.from(pub).toString('hex'),
    address: bitcoin.payments.p2wpkh({ pubkey: pub, network: bitcoin.networks.bitcoin }).address!,
  };
}

/** A new random secp256k1 key (the caller zeroes `privateKey` when done). */
export function generateBitcoinKey(): GeneratedKey {
  const privateKey = randomSecp256k1PrivateKey();
  return { privateKey, ...deriveBitcoinKey(privateKey) };
}

/** The compressed public key of a stored key (33 bytes). */
export function publicKeyBytes(key: Pick<KeyView, 'publicKey'>): Buffer {
  const pub = Buffer.from(key.publicKey.replace(/^0x/, ''), 'hex');
  if (pub.length !== 33 || !ecc.isPoint(pub))
    throw new Error('the key is not a compressed secp256k1 public key');
  return pub;
}

/** The key's P2WPKH address on the chain's network. */
export function bitcoinAddressFor(key: KeyView, chain: ChainRecord): string {
  return bitcoin.payments.p2wpkh({ pubkey: publicKeyBytes(key), network: networkFor(chain) }).address!;
}

/**
 * True when `address` is a standard output address (P2PKH, P2SH, P2WPKH, P2WSH, P2TR) of the
 * chain's network, checksum included (base58check / bech32 / bech32m, as bitcoinjs-lib decodes).
 */
export function isBitcoinAddress(address: string, chain: ChainRecord): boolean {
  return standardScript(address, networkFor(chain)) !== undefined;
}
