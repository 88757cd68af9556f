import { randomBytes } from 'node:crypto';
import * as CSL from '@emurgo/cardano-serialization-lib-nodejs';
import { networkOf, type GeneratedKey, type KeyView } from '../../keys/chain-adapter.js';
import type { ChainRecord } from '../../chains/chain-types.js';

/** The Cardano networks a registry chain can be on (`cardano`, `cardano-preprod`, `cardano-preview`). */
export const CARDANO_NETWORKS = ['mainnet', 'preprod', 'preview'] as const;
export type CardanoNetwork = (typeof CARDANO_NETWORKS)[number];

/** The address network id of a chain: 1 mainnet, 0 every testnet. */
export function networkIdOf(chain: Pick<ChainRecord, 'name' | 'family' | 'isTestnet'>): number {
  return networkOf(chain, CARDANO_NETWORKS, 'preprod', 'mainnet') === 'mainnet' ? 1 : 0;
}

/**
 * The enterprise address (header type 6: payment key hash, no stake part) of a public key on a
 * network, in bech32 (`addr1…` mainnet, `addr_test1…` testnets). No stake part: signer holds one
 * payment key per agent and no stake key; a base address would need a second key (or reuse of the
 * payment key as stake key, which links and complicates rewards), and staking is not an agent's job.
 */
export function enterpriseAddress(publicKeyHex: string, networkId: number): string {
  const pk = CSL.PublicKey.from_hex(publicKeyHex);
  const cred = CSL.Credential.from_keyhash(pk.hash());
  return CSL.EnterpriseAddress.new(networkId, cred).to_address().to_bech32();
}

/** The public key (hex, 32 bytes) and mainnet enterprise address of a 32-byte ed25519 seed. */
export function deriveCardano(privateKey: Buffer): { publicKey: string; address: string } {
  if (privateKey.length !== 32) throw new Error('a Cardano payment key is 32 bytes');
  const sk = CSL.PrivateKey.from_normal_bytes(privateKey);
  try {
    const publicKey = sk.to_public().to_hex();
    return { publicKey, address: enterpriseAddress(publicKey, 1) };
  } finally {
    sk.free();
  }
}

/** A new random payment key. */
export function generateCardano(): GeneratedKey {
  const privateKey = randomBytes(32);
  return { privateKey, ...deriveCardano(privateKey) };
}

/** The key's enterprise address on the chain's network. */
export function cardanoAddressFor(key: KeyView, chain: ChainRecord): string {
  return enterpriseAddress(key.publicKey, networkIdOf(chain));
}

/**
 * A Shelley address (base, enterprise or pointer: what can hold funds) in canonical bech32 whose
 * network id is the chain's. Byron, reward (stake) and malformed addresses are refused.
 */
export function parseCardanoAddress(address: string, chain: ChainRecord): CSL.Address | undefined {
  let a: CSL.Address;
  try {
    a = CSL.Address.from_bech32(address);
  } catch {
    return undefined;
  }
  const kind = a.kind();
  if (
    kind !== CSL.AddressKind.Base &&
    kind !== CSL.AddressKind.Enterprise &&
    kind !== CSL.AddressKind.Pointer
  ) {
    return undefined;
  }
  if (a.network_id() !== networkIdOf(chain)) return undefined;
  // The human-readable part must be the network's (`addr` / `addr_test`), as the library writes it.
  if (a.to_bech32() !== address) return undefined;
  return a;
}

/** True when `address` is a Shelley payment address of the chain's network (checksum included). */
export function isCardanoAddress(address: string, chain: ChainRecord): boolean {
  return parseCardanoAddress(address, chain) !== undefined;
}
