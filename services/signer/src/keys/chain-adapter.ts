import { CustosError, InvalidArgumentError } from '@custos/service-kit';
import { parseEvmValue } from '../evm/evm-fields.js';
import { keyNameOf } from '../chains/chain-fns.js';
import type { ChainFamily, ChainRecord } from '../chains/chain-types.js';

/** A fresh key pair: the private half as bytes (zero them when done) and its public view. */
export interface GeneratedKey {
  privateKey: Buffer;
  publicKey: string;
  address: string;
}

/** The public half of an agent's signing key, as stored. */
export interface KeyView {
  /** The family's mainnet address, as stored on the key (and shown by the key listing). */
  address: string;
  /** The public key as the adapter's `derive` wrote it. */
  publicKey: string;
}

/**
 * A transfer as the agent asked for it (the Transactions API's body, or a sign intent's
 * transaction fields), not yet checked. Amounts are the body's strings: an integer is the chain's
 * base unit (satoshi, lamport, drop, sun, lovelace; a token's base unit with `tokenMint`), a
 * decimal with a fraction (`"0.01"`) the major unit (BTC, SOL, XRP, TRX, ADA; whole tokens).
 */
export interface TransferInput {
  to: string;
  value: string;
  /** EVM calldata; any other family refuses a non-empty one (400 naming `data`). */
  data?: string | undefined;
  memo?: string | undefined;
  destinationTag?: number | undefined;
  feeRateSatPerVbyte?: number | undefined;
  feeLimitSun?: number | undefined;
  tokenMint?: string | undefined;
  tokenDecimals?: number | undefined;
  ttl?: number | undefined;
}

/** Where and how to reach a chain's node (its registry `rpc_url`) with a per-call timeout. */
export interface ChainEndpoint {
  chain: ChainRecord;
  url: string;
  timeoutMs: number;
}

/** What `prepare` may read beside the chain. */
export interface PrepareContext {
  endpoint: ChainEndpoint;
  /** The agent's key for the chain's family. */
  key: KeyView;
  /** The key's address on this chain's network (`addressFor`). */
  from: string;
  /**
   * Inputs (UTXO chains: `txid:vout`) held by this key's other transactions that are not final
   * yet: never spend them. The database refuses two transactions holding one input.
   */
  inputsInUse(): Promise<ReadonlySet<string>>;
}

/** A transfer ready to sign: built from the request and the chain's state. */
export interface PreparedTransfer<U = unknown> {
  /** What `sign` signs: the adapter's own, JSON-serialisable. */
  unsigned: U;
  /** The recipient as the chain writes it (normalised). */
  to: string;
  /** The amount in base units (of the token with `tokenMint`). */
  value: bigint;
  /** The most the transfer pays in fees, in the chain's native base unit. */
  fee: bigint;
  /**
   * What it is expected to pay when that is less than `fee` (Tron TRC-20: the dry run's energy,
   * where `fee` counts the whole fee limit); the in-flight check of `available` counts this.
   */
  expectedFee?: bigint;
  /** Inputs the transfer spends (UTXO chains), reserved in the database with the transaction. */
  inputs: string[];
  /**
   * Set by chains that order an account's transactions by a number (XRP's `Sequence`): the
   * chain's next one for the account. Signer allocates the number in the database (per key and
   * chain, as EVM nonces) and hands it to `sign`.
   */
  sequenceFromChain?: bigint;
  /**
   * Until when the chain may still include it (the watcher concludes `expired` after): Solana's
   * last valid block height, XRP's LastLedgerSequence, Cardano's ttl slot, Tron's expiration (ms).
   */
  expiry?: { kind: 'block_height' | 'ledger' | 'slot' | 'time_ms'; value: bigint };
  /** Chain-specific facts shown on the transaction and in audit (no secret): memo, fee rate, token … */
  details: Record<string, string | number | boolean>;
  /**
   * Account chains: what the key can spend as `prepare` read it from the chain, in base units —
   * `native` after the reserve or rent the chain keeps, `token` the token's balance for a token
   * transfer. Signer refuses (400 `value`, insufficient_funds) a transfer that, with the key's other
   * transfers on the chain not yet given to the node, spends more than that (checked under a
   * database lock, so parallel requests cannot overspend together). UTXO chains leave it out (their
   * inputs are held instead).
   */
  available?: { native: bigint; token?: bigint };
}

/** A signed transfer: the bytes to broadcast (hex or base64 as the chain's API takes them) and its id. */
export interface SignedTransfer {
  signedTx: string;
  txHash: string;
}

/** Where a broadcast transfer is, as the chain says. */
export type TransferStatus =
  /** The node knows it; not final yet. */
  | { state: 'pending' }
  | { state: 'confirmed'; block?: bigint; fee?: bigint }
  /** Included, but the chain's execution failed it (Solana `err`, XRP `tec…`, Tron `REVERT`): the fee is spent. */
  | { state: 'failed'; reason: string; block?: bigint; fee?: bigint }
  /** It can never be included (its blockhash, ledger, ttl or expiration passed; an input spent by another). */
  | { state: 'expired'; reason: string }
  /** The node does not know it (yet): signer sends the same bytes again. */
  | { state: 'unknown' };

/**
 * A chain node's failure. `rejected`: the node answered and refused this transaction (bad
 * sequence, insufficient funds, expired blockhash …), so it is not in the node's pool;
 * `alreadyKnown`: the node already has these bytes. Neither: no usable answer (timeout, reset,
 * 5xx) — the node may or may not have it.
 */
export class ChainRpcError extends Error {
  readonly rejected: boolean;
  readonly alreadyKnown: boolean;
  /** The node's HTTP status, when it answered one (e.g. 404 for a lookup of an unknown id). */
  readonly status: number | undefined;
  constructor(message: string, o: { rejected?: boolean; alreadyKnown?: boolean; status?: number } = {}) {
    super(message);
    this.name = 'ChainRpcError';
    this.rejected = o.rejected ?? false;
    this.alreadyKnown = o.alreadyKnown ?? false;
    this.status = o.status;
  }
}

/** 400 naming `value` (type `insufficient_funds`): the key's balance does not cover amount and fee. */
export function insufficientFunds(detail: string, field = 'value'): CustosError {
  return new CustosError('invalid_argument', { detail, field, type: 'insufficient_funds' });
}

/**
 * Transfers of a family other than EVM (EVM keeps its own nonce-managed path, src/evm): parse the
 * request, build it from the chain's state, sign it, broadcast it and follow it. Every chain call
 * goes to `endpoint.url` with `endpoint.timeoutMs`, and fails with ChainRpcError.
 */
export interface TransferOps<U = unknown> {
  /** Checks the request's fields for this chain (InvalidArgumentError naming the field). */
  parse(input: TransferInput, chain: ChainRecord): TransferInput;
  /**
   * Reads the chain (balances, UTXOs, fees, blockhash, sequence) and builds the transfer;
   * insufficientFunds (400 `value`) when the key cannot pay, InvalidArgumentError naming the
   * field for what the chain would refuse (dust, unfunded recipient below the reserve …).
   */
  prepare(ctx: PrepareContext, input: TransferInput): Promise<PreparedTransfer<U>>;
  /** Signs offline. `sequence`: the number signer allocated when `prepare` asked for one. */
  sign(
    privateKey: Buffer,
    prepared: PreparedTransfer<U>,
    o: { chain: ChainRecord; key: KeyView; sequence?: bigint },
  ): SignedTransfer | Promise<SignedTransfer>;
  /** Gives the signed bytes to the node (ChainRpcError on refusal or no answer). */
  broadcast(endpoint: ChainEndpoint, signed: SignedTransfer): Promise<void>;
  /** Where a broadcast transfer is. `expiry` as `prepare` gave it. */
  status(
    endpoint: ChainEndpoint,
    t: { txHash: string; signedTx: string; expiry?: PreparedTransfer['expiry'] },
  ): Promise<TransferStatus>;
}

/**
 * What signer needs from a chain family: keys and addresses, and (all but EVM, which has its own
 * path in src/evm) transfers. One adapter per family, in src/adapters/<family>/, listed in
 * src/adapters/registry.ts.
 */
export interface ChainAdapter {
  readonly family: ChainFamily;
  /** The curve of the family's keys, as responses name it (`secp256k1`, `ed25519`). */
  readonly curve: string;
  /** A new random key pair. */
  generate(): GeneratedKey;
  /** The public key and (mainnet) address of a private key (for import and checks). */
  derive(privateKey: Buffer): { publicKey: string; address: string };
  /**
   * The key's address on the chain's network (Bitcoin `bc1`/`tb1`/`bcrt1`, Cardano
   * `addr`/`addr_test`); families with one address form return `key.address`.
   */
  addressFor?(key: KeyView, chain: ChainRecord): string;
  /** True when `address` is well formed for the chain (checksums included). */
  isAddress?(address: string, chain: ChainRecord): boolean;
  /** Transfers; absent for EVM (src/evm). */
  readonly transfers?: TransferOps;
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

/** The key's address on the chain's network. */
export function addressOn(adapter: ChainAdapter, key: KeyView, chain: ChainRecord): string {
  return adapter.addressFor ? adapter.addressFor(key, chain) : key.address;
}

/**
 * The network a non-EVM chain of the registry is on, from its name: the family's own name is
 * mainnet; `<family>-<network>[-…]` names a network the adapter knows (`bitcoin-regtest`,
 * `solana-devnet`, `cardano-preprod`, `tron-nile` …); any other name is the family's main test
 * network when the chain is a testnet, else mainnet.
 */
export function networkOf<N extends string>(
  chain: Pick<ChainRecord, 'name' | 'family' | 'isTestnet'>,
  known: readonly N[],
  testnet: N,
  mainnet: N,
): N {
  const prefix = `${chain.family}-`;
  if (chain.name.startsWith(prefix)) {
    const word = chain.name.slice(prefix.length).split('-')[0] as N;
    if (known.includes(word)) return word;
  }
  return chain.isTestnet ? testnet : mainnet;
}

/**
 * A transfer amount (`value`) in base units: an integer string is base units, a decimal with a
 * fraction (`"0.01"`) is major units of `decimals` decimals. More than zero and at most `max`
 * (default 2^64 - 1: most chains' amount fields are 64-bit; a TRC-20 amount is a uint256);
 * 400 naming `field` otherwise.
 */
export function parseTransferAmount(
  raw: string,
  decimals: number,
  field = 'value',
  max: bigint = 0xffffffffffffffffn,
): bigint {
  if (raw === '') throw new InvalidArgumentError(field, 'is required');
  if (/^0x/i.test(raw)) {
    throw new InvalidArgumentError(field, 'must be a decimal integer (base units) or a decimal amount');
  }
  const v = parseEvmValue(raw, decimals, field);
  if (v <= 0n) throw new InvalidArgumentError(field, 'must be more than zero');
  if (v > max) {
    const bits = (max + 1n).toString(2).length - 1;
    const limit = max + 1n === 1n << BigInt(bits) ? `2^${bits} - 1` : max.toString();
    throw new InvalidArgumentError(field, `is more than ${limit} base units`);
  }
  return v;
}
