import * as ecc from '@bitcoinerlab/secp256k1';
import type * as B from 'bitcoinjs-lib' with { 'resolution-mode': 'import' };
import type * as E from 'ecpair' with { 'resolution-mode': 'import' };
import { networkOf } from '../../keys/chain-adapter.js';
import type { ChainRecord } from '../../chains/chain-types.js';

// bitcoinjs-lib 7 and ecpair 3 are ES module packages with a CommonJS build: signer (CommonJS)
// loads that build, typed by the packages' own declarations. The curve is
// @bitcoinerlab/secp256k1 (noble-curves, no WASM), checked by initEccLib and ECPairFactory.
// eslint-disable-next-line @typescript-eslint/no-require-imports
export const bitcoin = require('bitcoinjs-lib') as typeof B;
// eslint-disable-next-line @typescript-eslint/no-require-imports
const ecpair = require('ecpair') as typeof E;
bitcoin.initEccLib(ecc);

export type { B };
export { ecc };

/** Key pairs (signing) over @bitcoinerlab/secp256k1. */
export const ECPair = ecpair.ECPairFactory(ecc);

/** The Bitcoin networks a chain of the registry can be on. */
export const BITCOIN_NETWORKS = ['mainnet', 'testnet', 'signet', 'regtest'] as const;
export type BitcoinNetworkName = (typeof BITCOIN_NETWORKS)[number];

/** bitcoinjs-lib's parameters per network (signet uses testnet's: `tb1…`, same version bytes). */
const PARAMS: Record<BitcoinNetworkName, B.networks.Network> = {
  mainnet: bitcoin.networks.bitcoin,
  testnet: bitcoin.networks.testnet,
  signet: bitcoin.networks.testnet,
  regtest: bitcoin.networks.regtest,
};

/** The chain's network: `bitcoin` mainnet, `bitcoin-<network>…` that network, other testnets testnet. */
export function networkNameOf(chain: Pick<ChainRecord, 'name' | 'family' | 'isTestnet'>): BitcoinNetworkName {
  return networkOf(chain, BITCOIN_NETWORKS, 'testnet', 'mainnet');
}

export function paramsOf(name: BitcoinNetworkName): B.networks.Network {
  return PARAMS[name];
}

/** The chain's bitcoinjs-lib network parameters. */
export function networkFor(chain: Pick<ChainRecord, 'name' | 'family' | 'isTestnet'>): B.networks.Network {
  return PARAMS[networkNameOf(chain)];
}

/** bitcoind's dust relay fee: 3 sat/vB. */
const DUST_RELAY_SAT_PER_VB = 3n;

/** True for a witness program output script (OP_0..OP_16 then one push of 2..40 bytes). */
function isWitnessProgram(script: Uint8Array): boolean {
  if (script.length < 4 || script.length > 42) return false;
  const v = script[0]!;
  if (v !== 0x00 && (v < 0x51 || v > 0x60)) return false;
  return script[1]! + 2 === script.length;
}

/**
 * The smallest amount bitcoind relays in an output of `script` (its GetDustThreshold at the
 * default 3 sat/vB dust relay fee): 294 sat for P2WPKH, 330 for P2WSH/P2TR, 540 for P2SH, 546
 * for P2PKH.
 */
export function dustThreshold(script: Uint8Array): bigint {
  const len = script.length;
  const varint = len < 0xfd ? 1 : len <= 0xffff ? 3 : 5;
  const spend = isWitnessProgram(script) ? 32 + 4 + 1 + Math.floor(107 / 4) + 4 : 32 + 4 + 1 + 107 + 4;
  return BigInt(8 + varint + len + spend) * DUST_RELAY_SAT_PER_VB;
}

/** The standard output kinds a transfer may pay; undefined for any other script. */
export function outputKind(script: Uint8Array): 'p2pkh' | 'p2sh' | 'p2wpkh' | 'p2wsh' | 'p2tr' | undefined {
  const s = script;
  if (
    s.length === 25 &&
    s[0] === 0x76 &&
    s[1] === 0xa9 &&
    s[2] === 0x14 &&
    s[23] === 0x88 &&
    s[24] === 0xac
  ) {
    return 'p2pkh';
  }
  if (s.length === 23 && s[0] === 0xa9 && s[1] === 0x14 && s[22] === 0x87) return 'p2sh';
  if (s.length === 22 && s[0] === 0x00 && s[1] === 0x14) return 'p2wpkh';
  if (s.length === 34 && s[0] === 0x00 && s[1] === 0x20) return 'p2wsh';
  if (s.length === 34 && s[0] === 0x51 && s[1] === 0x20) return 'p2tr';
  return undefined;
}

/** `address`'s output script on `network` when it is a standard one, else undefined. */
export function standardScript(address: string, network: B.networks.Network): Uint8Array | undefined {
  let script: Uint8Array;
  try {
    script = bitcoin.address.toOutputScript(address, network);
  } catch {
    return undefined;
  }
  return outputKind(script) ? script : undefined;
}

/** The network(s) other than `network` whose address `address` is (for a clear refusal). */
export function otherNetworkOf(address: string, not: BitcoinNetworkName): BitcoinNetworkName | undefined {
  const exclude = PARAMS[not];
  for (const n of BITCOIN_NETWORKS) {
    if (PARAMS[n] === exclude) continue;
    if (standardScript(address, PARAMS[n])) return n;
  }
  return undefined;
}
