import { InvalidArgumentError } from '@custos/service-kit';
import { keyNameOf } from '../chains/chain-fns.js';
import type { ChainFamily, ChainRecord } from '../chains/chain-types.js';

/** A fresh key pair: the private half as bytes (zero them when done) and its public view. */
export interface GeneratedKey {
  privateKey: Buffer;
  publicKey: string;
  address: string;
}

/**
 * What signer needs from a chain family. This issue uses key generation and address derivation;
 * building, signing and broadcasting transactions and messages join this interface with the
 * Intents API, one adapter per family (EVM first, the other five next).
 */
export interface ChainAdapter {
  readonly family: ChainFamily;
  /** The curve of the family's keys, as responses name it (`secp256k1`, `ed25519`). */
  readonly curve: string;
  /** A new random key pair. */
  generate(): GeneratedKey;
  /** The public key and address of a private key (for import and checks). */
  derive(privateKey: Buffer): { publicKey: string; address: string };
}

/** The adapters of the families keys can be made for; a family without one answers "not supported yet". */
export type ChainAdapters = Partial<Record<ChainFamily, ChainAdapter>>;

/** The chain's family adapter; 400 naming `field` when signer cannot make keys for that family yet. */
export function adapterFor(adapters: ChainAdapters, chain: ChainRecord, field = 'chain'): ChainAdapter {
  const a = adapters[chain.family];
  if (!a) {
    throw new InvalidArgumentError(
      field,
      `signing keys for ${keyNameOf(chain.family)} chains are not supported yet`,
    );
  }
  return a;
}
