import { randomBytes } from 'node:crypto';
import { Keypair, PublicKey } from '@solana/web3.js';
import { networkOf, type GeneratedKey, type KeyView } from '../../keys/chain-adapter.js';
import type { ChainRecord } from '../../chains/chain-types.js';

/** The Solana clusters a chain's name can name (`solana-devnet` …); the address is the same on each. */
export const SOLANA_NETWORKS = ['mainnet', 'devnet', 'testnet'] as const;
export type SolanaNetwork = (typeof SOLANA_NETWORKS)[number];

/** The cluster a registry chain is on (`solana` mainnet, `solana-devnet`, any other testnet: devnet). */
export function solanaNetworkOf(chain: Pick<ChainRecord, 'name' | 'family' | 'isTestnet'>): SolanaNetwork {
  return networkOf(chain, SOLANA_NETWORKS, 'devnet', 'mainnet');
}

/**
 * The ed25519 key pair of a stored private key: the 32-byte seed signer generates, or the 64-byte
 * `seed ‖ public key` form of `solana-keygen` files (its public half must match the seed's).
 */
export function keypairOf(privateKey: Buffer): Keypair {
  if (privateKey.length === 32) return Keypair.fromSeed(privateKey);
  if (privateKey.length === 64) {
    const kp = Keypair.fromSeed(privateKey.subarray(0, 32));
    if (!Buffer.from(kp.publicKey.toBytes()).equals(privateKey.subarray(32))) {
      forget(kp);
      throw new Error('the 64-byte Solana secret key does not hold the public key of its seed');
    }
    return kp;
  }
  throw new Error('a Solana private key is a 32-byte ed25519 seed (or the 64-byte seed ‖ public key form)');
}

/** Zeroes the secret bytes a Keypair keeps (best effort: web3.js holds them in `_keypair`). */
export function forget(kp: Keypair): void {
  (kp as unknown as { _keypair?: { secretKey?: Uint8Array } })._keypair?.secretKey?.fill(0);
}

const BASE58 = /^[1-9A-HJ-NP-Za-km-z]{32,44}$/;

/** The public key of a base58 address (32 bytes, canonical spelling), or undefined. */
export function solanaPublicKey(address: string): PublicKey | undefined {
  if (typeof address !== 'string' || !BASE58.test(address)) return undefined;
  try {
    const k = new PublicKey(address);
    return k.toBase58() === address ? k : undefined;
  } catch {
    return undefined;
  }
}

/**
 * True when `address` is a Solana account address: base58 of 32 bytes. Off-curve addresses
 * (program-derived, e.g. a multisig vault) are addresses too; SOL may go to them, SPL tokens not
 * (see solana-transfer.ts).
 */
export function isSolanaAddress(address: string): boolean {
  return solanaPublicKey(address) !== undefined;
}

/** Public key and address (the same base58 string) of a private key. */
export function deriveSolana(privateKey: Buffer): { publicKey: string; address: string } {
  const kp = keypairOf(privateKey);
  const publicKey = kp.publicKey.toBase58();
  forget(kp);
  return { publicKey, address: publicKey };
}

/** A fresh key: a random 32-byte ed25519 seed. */
export function generateSolana(): GeneratedKey {
  const privateKey = randomBytes(32);
  return { privateKey, ...deriveSolana(privateKey) };
}

/** A Solana address is the same on every cluster. */
export function solanaAddressFor(key: KeyView): string {
  return key.address;
}
