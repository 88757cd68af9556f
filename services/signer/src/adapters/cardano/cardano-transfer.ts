import * as CSL from '@emurgo/cardano-serialization-lib-nodejs';
import { InvalidArgumentError } from '@custos/service-kit';
import {
  ChainRpcError,
  insufficientFunds,
  parseTransferAmount,
  type ChainEndpoint,
  type PrepareContext,
  type PreparedTransfer,
  type SignedTransfer,
  type TransferInput,
  type TransferOps,
  type TransferStatus,
} from '../../keys/chain-adapter.js';
import type { ChainRecord } from '../../chains/chain-types.js';
import { enterpriseAddress, networkIdOf, parseCardanoAddress } from './cardano-keys.js';
import {
  addressUtxos,
  blockfrostOf,
  inMempool,
  latestBlock,
  latestParameters,
  submitTx,
  txByHash,
  txOutputs,
  type BlockfrostParameters,
  type BlockfrostUtxo,
} from './cardano-node.js';

/** ADA has 6 decimals: 1 ADA = 1,000,000 lovelace. */
export const LOVELACE_DECIMALS = 6;
/** Slots a transfer stays valid without a `ttl` (slots are 1 s: two hours). */
export const DEFAULT_TTL_SLOTS = 7200;
/** The CIP-20 message label. */
export const CIP20_LABEL = 674;
/** The longest memo (UTF-8 bytes), sent as CIP-20 chunks of at most 64 bytes. */
export const MAX_MEMO_BYTES = 1024;
/** The furthest a requested `ttl` may be past the tip: one day of 1 s slots (inputs are held until then). */
export const MAX_TTL_SLOTS = 86_400;
/**
 * The most a transfer may burn as fee above the minimum fee when the rest of its inputs is below
 * the minimum UTxO of a change output (0.2 ADA); more is refused (400 `value`).
 */
export const MAX_BURN_LOVELACE = 200_000n;

/** What `sign` signs: the body's CBOR as built (its hash is the transaction id) and the metadata. */
export interface CardanoUnsigned {
  /** The transaction body, CBOR hex. */
  body: string;
  /** The auxiliary data (CIP-20 memo), CBOR hex, when there is a memo. */
  auxiliaryData?: string;
  /** The payment key hash that must sign (the inputs' credential). */
  signer: string;
  networkId: number;
}

/** The memo as CIP-20 strings of at most 64 UTF-8 bytes each (a character is never split). */
export function memoChunks(memo: string): string[] {
  const chunks: string[] = [];
  let cur = '';
  for (const ch of memo) {
    if (Buffer.byteLength(cur + ch, 'utf8') > 64) {
      chunks.push(cur);
      cur = '';
    }
    cur += ch;
  }
  if (cur) chunks.push(cur);
  return chunks;
}

function bn(v: bigint | number | string): CSL.BigNum {
  return CSL.BigNum.from_str(String(v));
}

/** The builder's configuration from Blockfrost's protocol parameters. */
function builderConfig(p: BlockfrostParameters): CSL.TransactionBuilderConfig {
  const perByte = p.coins_per_utxo_size ?? '4310';
  return CSL.TransactionBuilderConfigBuilder.new()
    .fee_algo(CSL.LinearFee.new(bn(p.min_fee_a), bn(p.min_fee_b)))
    .coins_per_utxo_byte(bn(perByte))
    .pool_deposit(bn(p.pool_deposit))
    .key_deposit(bn(p.key_deposit))
    .max_value_size(Number(p.max_val_size ?? 5000))
    .max_tx_size(p.max_tx_size)
    .build();
}

/** A UTxO holds only ADA (no native asset) and no reference script: the ones a payment spends. */
function adaOnly(u: BlockfrostUtxo): boolean {
  return u.amount.every((a) => a.unit === 'lovelace') && !u.reference_script_hash;
}

function lovelaceOf(u: BlockfrostUtxo): bigint {
  const a = u.amount.find((x) => x.unit === 'lovelace');
  return a ? BigInt(a.quantity) : 0n;
}

/** An ADA payment's fields for Cardano (400 naming the field). */
function parse(input: TransferInput, chain: ChainRecord): TransferInput {
  if (input.data !== undefined && input.data !== '' && input.data !== '0x') {
    throw new InvalidArgumentError('data', 'calldata is for EVM chains; a Cardano transfer has none');
  }
  if (input.destinationTag !== undefined) {
    throw new InvalidArgumentError('destination_tag', 'is an XRP Ledger field; Cardano has none');
  }
  if (input.feeRateSatPerVbyte !== undefined) {
    throw new InvalidArgumentError(
      'fee_rate_sat_per_vbyte',
      'is a Bitcoin field; Cardano fees follow the protocol parameters',
    );
  }
  if (input.feeLimitSun !== undefined) {
    throw new InvalidArgumentError('fee_limit_sun', 'is a Tron field; Cardano has none');
  }
  // An empty token_mint is no token (as absent), as an empty memo is no memo.
  const mint = input.tokenMint === '' ? undefined : input.tokenMint;
  if (mint !== undefined || input.tokenDecimals !== undefined) {
    throw new InvalidArgumentError(
      mint !== undefined ? 'token_mint' : 'token_decimals',
      'Cardano native assets are not supported yet (ADA only)',
    );
  }
  const to = (input.to ?? '').trim();
  if (!to) throw new InvalidArgumentError('to', 'is required');
  if (!parseCardanoAddress(to, chain)) {
    throw new InvalidArgumentError(
      'to',
      `must be a Shelley payment address of ${chain.name} (bech32 ${networkIdOf(chain) === 1 ? 'addr1…' : 'addr_test1…'})`,
    );
  }
  parseTransferAmount(input.value, LOVELACE_DECIMALS);
  if (input.memo !== undefined && Buffer.byteLength(input.memo, 'utf8') > MAX_MEMO_BYTES) {
    throw new InvalidArgumentError('memo', `is longer than ${MAX_MEMO_BYTES} UTF-8 bytes`);
  }
  if (input.ttl !== undefined && (!Number.isSafeInteger(input.ttl) || input.ttl <= 0)) {
    throw new InvalidArgumentError('ttl', 'must be an absolute slot number (a positive integer)');
  }
  const out: TransferInput = { to, value: input.value };
  if (input.memo !== undefined && input.memo !== '') out.memo = input.memo;
  if (input.ttl !== undefined) out.ttl = input.ttl;
  return out;
}

/** Reads the key's UTxOs, the parameters and the tip, and builds the payment (with change to the key). */
async function prepare(ctx: PrepareContext, raw: TransferInput): Promise<PreparedTransfer<CardanoUnsigned>> {
  const chain = ctx.endpoint.chain;
  const input = parse(raw, chain);
  const value = parseTransferAmount(input.value, LOVELACE_DECIMALS);
  const bf = blockfrostOf(ctx.endpoint);
  const [params, tip, utxos, inUse] = await Promise.all([
    latestParameters(bf),
    latestBlock(bf),
    addressUtxos(bf, ctx.from),
    ctx.inputsInUse(),
  ]);
  let ttl: number;
  if (input.ttl !== undefined) {
    if (input.ttl <= tip.slot) {
      throw new InvalidArgumentError(
        'ttl',
        `slot ${input.ttl} is not after the chain's tip (slot ${tip.slot})`,
      );
    }
    if (input.ttl > tip.slot + MAX_TTL_SLOTS) {
      throw new InvalidArgumentError(
        'ttl',
        `slot ${input.ttl} is more than ${MAX_TTL_SLOTS} slots (one day) after the chain's tip (slot ${tip.slot}); ` +
          `the inputs would be held until then`,
      );
    }
    ttl = input.ttl;
  } else {
    ttl = tip.slot + DEFAULT_TTL_SLOTS;
  }

  const from = CSL.Address.from_bech32(ctx.from);
  const keyHash = from.payment_cred()?.to_keyhash();
  if (!keyHash) throw new Error('the key address has no payment key hash');
  const to = parseCardanoAddress(input.to, chain)!;
  const output = CSL.TransactionOutput.new(to, CSL.Value.new(bn(value)));
  const dataCost = CSL.DataCost.new_coins_per_byte(bn(params.coins_per_utxo_size ?? '4310'));
  const minUtxo = BigInt(CSL.min_ada_for_output(output, dataCost).to_str());
  if (value < minUtxo) {
    throw new InvalidArgumentError(
      'value',
      `is below the chain's minimum UTxO for this output: ${minUtxo} lovelace (${Number(minUtxo) / 1e6} ADA)`,
    );
  }
  let aux: CSL.AuxiliaryData | undefined;
  if (input.memo !== undefined) {
    const list = CSL.MetadataList.new();
    for (const c of memoChunks(input.memo)) list.add(CSL.TransactionMetadatum.new_text(c));
    const map = CSL.MetadataMap.new();
    map.insert(CSL.TransactionMetadatum.new_text('msg'), CSL.TransactionMetadatum.new_list(list));
    const md = CSL.GeneralTransactionMetadata.new();
    md.insert(bn(CIP20_LABEL), CSL.TransactionMetadatum.new_map(map));
    aux = CSL.AuxiliaryData.new();
    aux.set_metadata(md);
  }

  // Spendable: ADA-only UTxOs no other transaction of this key holds (tokens stay untouched),
  // largest first.
  const free = utxos
    .filter((u) => adaOnly(u) && !inUse.has(`${u.tx_hash}:${u.output_index}`))
    .sort((a, b) => {
      const d = lovelaceOf(b) - lovelaceOf(a);
      return d > 0n ? 1 : d < 0n ? -1 : a.tx_hash.localeCompare(b.tx_hash) || a.output_index - b.output_index;
    });
  const available = free.reduce((s, u) => s + lovelaceOf(u), 0n);
  const short = (): Error =>
    insufficientFunds(
      `${ctx.from} has ${available} spendable lovelace in ${free.length} ADA-only UTxO(s); ` +
        `${value} lovelace plus the fee (about ${params.min_fee_b + params.min_fee_a * 300} lovelace) is more`,
    );
  if (free.length === 0 || available < value) throw short();

  // Coin selection: the next largest input while the change would be below the minimum UTxO (so
  // it is returned instead of burnt). With change → done; without, the best (least burnt) plan
  // is kept for when no input is left.
  const config = builderConfig(params);
  const build = (k: number): CSL.TransactionBuilder => {
    const b = CSL.TransactionBuilder.new(config);
    for (const u of free.slice(0, k)) {
      b.add_key_input(
        keyHash,
        CSL.TransactionInput.new(CSL.TransactionHash.from_hex(u.tx_hash), u.output_index),
        CSL.Value.new(bn(lovelaceOf(u))),
      );
    }
    b.add_output(output);
    b.set_ttl_bignum(bn(ttl));
    if (aux) b.set_auxiliary_data(aux);
    return b;
  };
  let builder: CSL.TransactionBuilder | undefined;
  let burning: { builder: CSL.TransactionBuilder; burnt: bigint; total: bigint; minFee: bigint } | undefined;
  let total = 0n;
  for (let k = 1; k <= free.length; k++) {
    total += lovelaceOf(free[k - 1]!);
    if (total < value + BigInt(params.min_fee_b)) continue;
    let b: CSL.TransactionBuilder;
    let minFee: bigint;
    let changed: boolean;
    try {
      b = build(k);
      minFee = BigInt(b.min_fee().to_str());
      if (total < value + minFee) continue;
      changed = b.add_change_if_needed(from);
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      if (/size/i.test(msg)) {
        throw new InvalidArgumentError('value', `needs more UTxOs than one transaction can spend (${msg})`);
      }
      continue;
    }
    if (changed) {
      builder = b;
      break;
    }
    const burnt = total - value - minFee;
    if (!burning || burnt < burning.burnt) burning = { builder: b, burnt, total, minFee };
    if (burnt === 0n) break;
  }
  if (!builder) {
    if (!burning) throw short();
    if (burning.burnt > MAX_BURN_LOVELACE) {
      // What could be sent instead: everything (no change), or little enough for a change output.
      const changeOut = CSL.TransactionOutput.new(from, CSL.Value.new(bn(burning.total)));
      const minChange = BigInt(CSL.min_ada_for_output(changeOut, dataCost).to_str());
      const changeFee = BigInt(params.min_fee_a) * BigInt(changeOut.to_bytes().length + 8);
      const withChange = burning.total - burning.minFee - changeFee - minChange;
      throw new InvalidArgumentError(
        'value',
        `would leave ${burning.burnt} lovelace over the fee that cannot be returned as change (a change ` +
          `output needs at least ${minChange} lovelace) and would be burnt as fee; Custos burns at most ` +
          `${MAX_BURN_LOVELACE} lovelace. Send ${burning.total - burning.minFee} lovelace (everything)` +
          `${withChange >= minUtxo ? ` or at most about ${withChange} lovelace` : ''}, or fund the key with another UTxO`,
      );
    }
    builder = burning.builder;
  }
  const body = builder.build();
  const fee = BigInt(body.fee().to_str());
  const inputs: string[] = [];
  const ins = body.inputs();
  for (let i = 0; i < ins.len(); i++) {
    const ti = ins.get(i);
    inputs.push(`${ti.transaction_id().to_hex()}:${ti.index()}`);
  }
  let change = 0n;
  const outs = body.outputs();
  for (let i = 1; i < outs.len(); i++) change += BigInt(outs.get(i).amount().coin().to_str());
  const unsigned: CardanoUnsigned = {
    body: body.to_hex(),
    signer: keyHash.to_hex(),
    networkId: networkIdOf(chain),
  };
  const auxData = builder.get_auxiliary_data();
  if (auxData) unsigned.auxiliaryData = auxData.to_hex();
  const details: PreparedTransfer['details'] = {
    ttl_slot: ttl,
    inputs: inputs.length,
    change_lovelace: change.toString(),
  };
  if (input.memo !== undefined) details.memo = input.memo;
  return {
    unsigned,
    to: to.to_bech32(),
    value,
    fee,
    inputs,
    expiry: { kind: 'slot', value: BigInt(ttl) },
    details,
  };
}

/**
 * What is signed is what was prepared (as Bitcoin's `sign` checks its PSBT): the body pays the
 * prepared recipient the prepared amount first, any other output is change to the key's own
 * address, the fee is the prepared fee, every address is on the chain's network, the inputs are
 * the prepared ones, and nothing else (certificates, withdrawals, mint) is in it.
 */
function checkBody(
  body: CSL.TransactionBody,
  prepared: PreparedTransfer<CardanoUnsigned>,
  o: { chain: ChainRecord; key: { publicKey: string } },
): void {
  const net = networkIdOf(o.chain);
  const u = prepared.unsigned;
  const fail = (why: string): never => {
    throw new Error(`the transfer to sign is not the prepared one: ${why}`);
  };
  if (u.networkId !== net)
    fail(`it was prepared for network id ${u.networkId}, chain ${o.chain.name} is ${net}`);
  const bodyNet = body.network_id();
  if (bodyNet && bodyNet.kind() !== net) fail('the body names another network');
  if (body.certs() || body.withdrawals() || body.mint() || body.voting_procedures() || body.collateral()) {
    fail('the body has certificates, withdrawals, mint, votes or collateral');
  }
  const own = enterpriseAddress(o.key.publicKey, net);
  const outs = body.outputs();
  if (outs.len() === 0) fail('the body pays nobody');
  for (let i = 0; i < outs.len(); i++) {
    const out = outs.get(i);
    const addr = out.address();
    if (addr.network_id() !== net) fail(`output ${i} is on another network`);
    if (out.amount().multiasset()) fail(`output ${i} carries native assets`);
    if (i === 0) {
      if (addr.to_bech32() !== prepared.to) fail('the first output is not the prepared recipient');
      if (BigInt(out.amount().coin().to_str()) !== BigInt(String(prepared.value))) {
        fail('the first output is not the prepared amount');
      }
    } else if (addr.to_bech32() !== own) {
      fail(`output ${i} is not change to the key's own address`);
    }
  }
  if (BigInt(body.fee().to_str()) !== BigInt(String(prepared.fee))) fail('the fee is not the prepared fee');
  if (Array.isArray(prepared.inputs) && prepared.inputs.length > 0) {
    const ins = body.inputs();
    const have: string[] = [];
    for (let i = 0; i < ins.len(); i++)
      have.push(`${ins.get(i).transaction_id().to_hex()}:${ins.get(i).index()}`);
    if (have.sort().join(',') !== [...prepared.inputs].sort().join(','))
      fail('the inputs are not the prepared ones');
  }
}

/** Signs the body's hash with the payment key: one vkey witness. */
function sign(
  privateKey: Buffer,
  prepared: PreparedTransfer<CardanoUnsigned>,
  o: { chain: ChainRecord; key: { publicKey: string } },
): SignedTransfer {
  if (privateKey.length !== 32) throw new Error('a Cardano payment key is 32 bytes');
  const u = prepared.unsigned;
  const tx = CSL.FixedTransaction.new_from_body_bytes(Buffer.from(u.body, 'hex'));
  checkBody(tx.body(), prepared, o);
  const sk = CSL.PrivateKey.from_normal_bytes(privateKey);
  try {
    const pub = sk.to_public();
    if (pub.to_hex() !== o.key.publicKey || pub.hash().to_hex() !== u.signer) {
      throw new Error('the private key is not the one the transfer was prepared for');
    }
    if (u.auxiliaryData) tx.set_auxiliary_data(Buffer.from(u.auxiliaryData, 'hex'));
    const hash = tx.transaction_hash();
    tx.add_vkey_witness(CSL.make_vkey_witness(hash, sk));
    return { signedTx: tx.to_hex(), txHash: hash.to_hex() };
  } finally {
    sk.free();
  }
}

/** True when the node already holds this transaction (in a block or in Blockfrost's mempool). */
async function nodeHas(ep: ChainEndpoint, txHash: string): Promise<boolean> {
  const bf = blockfrostOf(ep);
  if (await txByHash(bf, txHash)) return true;
  try {
    return await inMempool(bf, txHash);
  } catch (e) {
    if (e instanceof ChainRpcError && e.rejected) return false;
    throw e;
  }
}

/**
 * The transaction that spent one of `signedTx`'s inputs on chain (in a block), when it is not
 * `txHash` itself; undefined when no block has spent any of them (as far as the indexer knows).
 */
async function rivalSpend(
  ep: ChainEndpoint,
  signedTx: string,
  txHash: string,
): Promise<{ input: string; by: string } | undefined> {
  const bf = blockfrostOf(ep);
  for (const i of inputsOf(signedTx)) {
    const outs = await txOutputs(bf, i.hash);
    const by = outs?.find((x) => x.output_index === i.index)?.consumed_by_tx;
    if (by && by !== txHash) return { input: `${i.hash}:${i.index}`, by };
  }
  return undefined;
}

/**
 * `POST /tx/submit`. A `BadInputsUTxO` answer is a refusal only when a block spent one of the
 * inputs by another transaction: the node says the same of a re-send of this very transaction
 * once its mempool (or a block not indexed yet) holds it, and a backend without Blockfrost's
 * mempool endpoints cannot tell. Then (neither seen nor a rival spend) it is not a refusal: the
 * watcher keeps following the transaction until a block or its ttl decides.
 */
async function broadcast(ep: ChainEndpoint, signed: SignedTransfer): Promise<void> {
  const bf = blockfrostOf(ep);
  let id: string;
  try {
    id = await submitTx(bf, Buffer.from(signed.signedTx, 'hex'));
  } catch (e) {
    if (!(e instanceof ChainRpcError && e.rejected && /BadInputsUTxO/.test(e.message))) throw e;
    let rival: { input: string; by: string } | undefined;
    try {
      if (await nodeHas(ep, signed.txHash)) {
        throw new ChainRpcError(`the ${ep.chain.name} node already has transaction ${signed.txHash}`, {
          alreadyKnown: true,
        });
      }
      rival = await rivalSpend(ep, signed.signedTx, signed.txHash);
    } catch (lookup) {
      if (lookup instanceof ChainRpcError && lookup.alreadyKnown) throw lookup;
      throw new ChainRpcError(
        `the ${ep.chain.name} node answered BadInputsUTxO for ${signed.txHash} and looking up its inputs ` +
          `failed (${lookup instanceof Error ? lookup.message : String(lookup)})`,
      );
    }
    if (rival) {
      throw new ChainRpcError(`${e.message} (input ${rival.input} was spent on chain by ${rival.by})`, {
        rejected: true,
        ...(e.status !== undefined ? { status: e.status } : {}),
      });
    }
    throw new ChainRpcError(
      `the ${ep.chain.name} node answered BadInputsUTxO for ${signed.txHash}, but no block spent its ` +
        `inputs by another transaction: it may be in the node's mempool or in a block not indexed yet`,
    );
  }
  if (id !== signed.txHash) {
    throw new ChainRpcError(`the ${ep.chain.name} node answered transaction id ${id}, not ${signed.txHash}`);
  }
}

/** Inputs (`hash`, `index`) of a signed transaction. */
function inputsOf(signedTx: string): { hash: string; index: number }[] {
  try {
    const ins = CSL.FixedTransaction.from_hex(signedTx).body().inputs();
    const out: { hash: string; index: number }[] = [];
    for (let i = 0; i < ins.len(); i++) {
      out.push({ hash: ins.get(i).transaction_id().to_hex(), index: ins.get(i).index() });
    }
    return out;
  } catch {
    return [];
  }
}

/**
 * The tip is read first: a block that includes the transaction after that read (before its ttl)
 * is then seen by the reads that follow, never reported expired. In a block → confirmed
 * (Blockfrost lists a transaction once a block holds it); in Blockfrost's mempool → pending; an
 * input spent by another transaction → expired; the tip read at or past the ttl slot (the
 * ledger's invalidHereafter: no block at slot ≥ ttl may include it) → expired; else unknown
 * (signer sends the bytes again).
 */
async function status(
  ep: ChainEndpoint,
  t: { txHash: string; signedTx: string; expiry?: PreparedTransfer['expiry'] },
): Promise<TransferStatus> {
  const bf = blockfrostOf(ep);
  const tip = t.expiry ? await latestBlock(bf) : undefined;
  const tx = await txByHash(bf, t.txHash);
  if (tx) {
    const fee = BigInt(tx.fees);
    if (tx.valid_contract === false) {
      return { state: 'failed', reason: 'script validation failed', block: BigInt(tx.block_height), fee };
    }
    return { state: 'confirmed', block: BigInt(tx.block_height), fee };
  }
  const pooled = await inMempool(bf, t.txHash).catch((e: unknown) => {
    if (e instanceof ChainRpcError && e.rejected) return false;
    throw e;
  });
  if (pooled) return { state: 'pending' };
  for (const i of inputsOf(t.signedTx)) {
    const outs = await txOutputs(bf, i.hash);
    const by = outs?.find((x) => x.output_index === i.index)?.consumed_by_tx;
    if (by && by !== t.txHash)
      return { state: 'expired', reason: `input ${i.hash}:${i.index} was spent by ${by}` };
    if (by === t.txHash) return { state: 'pending' };
  }
  if (t.expiry && tip && BigInt(tip.slot) >= t.expiry.value) {
    return { state: 'expired', reason: `ttl slot ${t.expiry.value} passed (tip at slot ${tip.slot})` };
  }
  return { state: 'unknown' };
}

/** Cardano ADA payments through Blockfrost. */
export const cardanoTransfers: TransferOps<CardanoUnsigned> = { parse, prepare, sign, broadcast, status };
