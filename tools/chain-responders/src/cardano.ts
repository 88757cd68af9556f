import { randomBytes } from 'node:crypto';
import * as CSL from '@emurgo/cardano-serialization-lib-nodejs';
import { type ResponderAnswer, type ResponderRequest, serve } from './server.js';

/**
 * A local Cardano node as Blockfrost serves it (`/api/v0`): a UTxO set, a tip that tests advance,
 * mainnet-like protocol parameters, and `POST /tx/submit` that decodes the CBOR with
 * cardano-serialization-lib and applies the ledger's checks (inputs unspent, every vkey witness
 * valid over the body hash and present for each input's payment key, value conserved, fee ≥
 * min fee, outputs ≥ min-UTxO, ttl not passed, tx size), answering as cardano-submit-api does
 * through Blockfrost (`{"status_code":400,"error":"Bad Request","message":"…"}`).
 */

/** One unspent (or spent) output the responder knows. */
export interface CardanoUtxo {
  txHash: string;
  index: number;
  address: string;
  lovelace: bigint;
  /** Native assets: `policyIdHex + assetNameHex` → quantity. */
  assets: Record<string, bigint>;
  /** The block (hash) that created it. */
  block: string;
  /** The transaction that spent it on chain, once a block includes one. */
  consumedBy?: string;
}

/** A transaction the responder verified and accepted (in the mempool, later in a block). */
export interface CardanoSubmittedTx {
  hash: string;
  cbor: string;
  inputs: { txHash: string; index: number; address: string; lovelace: bigint }[];
  outputs: { address: string; lovelace: bigint; assets: Record<string, bigint> }[];
  fee: bigint;
  ttl?: bigint;
  size: number;
  /** The signers' public keys (hex) whose signatures verified. */
  signers: string[];
  /** The CIP-20 message (metadata label 674 `msg`) when present. */
  memo?: string[];
  /** Set when a block includes it. */
  block?: { height: number; hash: string; slot: number; time: number; index: number };
}

/** A block of the responder's chain. */
interface CardanoBlock {
  height: number;
  hash: string;
  slot: number;
  time: number;
  txs: string[];
  previous: string | null;
}

/** Protocol parameters as Blockfrost's `/epochs/latest/parameters` gives them (a subset kept typed). */
export type CardanoParameters = Record<string, unknown> & {
  min_fee_a: number;
  min_fee_b: number;
  max_tx_size: number;
  key_deposit: string;
  pool_deposit: string;
  coins_per_utxo_size: string;
  max_val_size: string;
};

/** Mainnet's parameters (Conway era, epoch 530-ish). */
export const MAINNET_PARAMETERS: CardanoParameters = {
  epoch: 530,
  min_fee_a: 44,
  min_fee_b: 155381,
  max_block_size: 90112,
  max_tx_size: 16384,
  max_block_header_size: 1100,
  key_deposit: '2000000',
  pool_deposit: '500000000',
  e_max: 18,
  n_opt: 500,
  a0: 0.3,
  rho: 0.003,
  tau: 0.2,
  decentralisation_param: 0,
  extra_entropy: null,
  protocol_major_ver: 10,
  protocol_minor_ver: 0,
  min_utxo: '4310',
  min_pool_cost: '170000000',
  nonce: '1a3be38bcbb7911969283716ad7aa550250226b76a61fc51cc9a9a35d9276d81',
  cost_models: null,
  price_mem: 0.0577,
  price_step: 0.0000721,
  max_tx_ex_mem: '14000000',
  max_tx_ex_steps: '10000000000',
  max_block_ex_mem: '62000000',
  max_block_ex_steps: '20000000000',
  max_val_size: '5000',
  collateral_percent: 150,
  max_collateral_inputs: 3,
  coins_per_utxo_size: '4310',
  coins_per_utxo_word: '4310',
  pvt_motion_no_confidence: 0.51,
  pvt_committee_normal: 0.51,
  pvt_committee_no_confidence: 0.51,
  pvt_hard_fork_initiation: 0.51,
  dvt_motion_no_confidence: 0.67,
  dvt_committee_normal: 0.67,
  dvt_committee_no_confidence: 0.6,
  dvt_update_to_constitution: 0.75,
  dvt_hard_fork_initiation: 0.6,
  dvt_p_p_network_group: 0.67,
  dvt_p_p_economic_group: 0.67,
  dvt_p_p_technical_group: 0.67,
  dvt_p_p_gov_group: 0.75,
  dvt_treasury_withdrawal: 0.67,
  committee_min_size: '7',
  committee_max_term_length: '146',
  gov_action_lifetime: '6',
  gov_action_deposit: '100000000000',
  drep_deposit: '500000000',
  drep_activity: '20',
  pvtpp_security_group: 0.51,
  pvt_p_p_security_group: 0.51,
  min_fee_ref_script_cost_per_byte: 15,
};

/** How tests shape and drive the responder. */
export interface CardanoResponder {
  /** The base URL (ends with `/api/v0`): the chain's `rpc_url`. */
  url: string;
  port: number;
  /** Network id of the addresses it accepts in outputs (0 testnets, 1 mainnet). */
  networkId: number;
  parameters: CardanoParameters;
  /** A new on-chain UTxO paying `address` (a confirmed funding transaction); returns `txhash#index`. */
  fund(address: string, lovelace: bigint, assets?: Record<string, bigint>): string;
  /** Moves the tip `slots` forward with an empty block (the mempool waits; expired ones drop). */
  advance(slots: number): void;
  /** A new block `slots` (default 20) slots on, including every mempool transaction still valid then. */
  produceBlock(slots?: number): CardanoBlock;
  /**
   * Without Blockfrost's mempool endpoints (`/mempool/*` answer 404 "Invalid path", as a
   * Blockfrost-compatible backend without a mempool does); the node's mempool still works.
   */
  mempoolApi(on: boolean): void;
  /** Called after each request is answered (e.g. to make a block arrive between two reads). */
  afterAnswer(fn: ((r: { method: string; path: string }) => void) | undefined): void;
  /** The chain's tip. */
  tip(): { slot: number; height: number; hash: string };
  /** Transactions the responder verified and accepted, by hash (mempool and included). */
  submitted: Map<string, CardanoSubmittedTx>;
  /** Hashes waiting in the mempool. */
  mempool(): string[];
  /** Unspent outputs of an address (on-chain view). */
  utxosOf(address: string): CardanoUtxo[];
  /** Lovelace held by an address on chain. */
  balanceOf(address: string): bigint;
  /** Answer the next `times` requests with `status` (Blockfrost's error shape). */
  failNext(times: number, status?: number): void;
  /** Stop answering (requests hang until `hang(false)` or close). */
  hang(on: boolean): void;
  /** Every request seen: method, path (without `/api/v0`), headers. */
  requests: { method: string; path: string; headers: ResponderRequest['headers'] }[];
  close(): Promise<void>;
}

const PREFIX = '/api/v0';
const ERROR_TITLES: Record<number, string> = {
  400: 'Bad Request',
  403: 'Forbidden',
  404: 'Not Found',
  415: 'Unsupported Media Type',
  418: 'Requested Banned',
  425: 'Mempool Full',
  429: 'Project Over Limit',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

function err(status: number, message: string): { status: number; json: unknown } {
  return { status, json: { status_code: status, error: ERROR_TITLES[status] ?? 'Error', message } };
}

const NOT_FOUND = (): { status: number; json: unknown } =>
  err(404, 'The requested component has not been found.');

/** The node's validation failure, as cardano-submit-api words it inside Blockfrost's message. */
function txFailure(...errors: string[]): { status: number; json: unknown } {
  const contents = {
    contents: {
      contents: {
        era: 'ShelleyBasedEraConway',
        error: errors.map((e) => `ConwayUtxowFailure (${e})`),
        kind: 'ShelleyTxValidationError',
      },
      tag: 'TxValidationErrorInCardanoMode',
    },
    tag: 'TxCmdTxSubmitValidationError',
  };
  return err(400, JSON.stringify({ contents, tag: 'TxSubmitFail' }));
}

function txInText(hash: string, index: number): string {
  return `TxIn (TxId {unTxId = SafeHash "${hash}"}) (TxIx {unTxIx = ${index}})`;
}

function valueOf(v: CSL.Value): { lovelace: bigint; assets: Record<string, bigint> } {
  const assets: Record<string, bigint> = {};
  const ma = v.multiasset();
  if (ma) {
    const policies = ma.keys();
    for (let i = 0; i < policies.len(); i++) {
      const p = policies.get(i);
      const as = ma.get(p);
      if (!as) continue;
      const names = as.keys();
      for (let j = 0; j < names.len(); j++) {
        const n = names.get(j);
        const q = BigInt(as.get(n)?.to_str() ?? '0');
        if (q !== 0n) {
          const unit = p.to_hex() + Buffer.from(n.name()).toString('hex');
          assets[unit] = (assets[unit] ?? 0n) + q;
        }
      }
    }
  }
  return { lovelace: BigInt(v.coin().to_str()), assets };
}

function assetsEqual(a: Record<string, bigint>, b: Record<string, bigint>): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) if ((a[k] ?? 0n) !== (b[k] ?? 0n)) return false;
  return true;
}

function addAssets(into: Record<string, bigint>, from: Record<string, bigint>): void {
  for (const [k, q] of Object.entries(from)) into[k] = (into[k] ?? 0n) + q;
}

function amountJson(lovelace: bigint, assets: Record<string, bigint>): { unit: string; quantity: string }[] {
  return [
    { unit: 'lovelace', quantity: lovelace.toString() },
    ...Object.entries(assets).map(([unit, q]) => ({ unit, quantity: q.toString() })),
  ];
}

/** The CIP-20 message strings of auxiliary data (label 674, `{"msg": [..]}`). */
function cip20(aux: CSL.AuxiliaryData | undefined): string[] | undefined {
  const md = aux?.metadata()?.get(CSL.BigNum.from_str('674'));
  if (!md) return undefined;
  try {
    const list = md.as_map().get(CSL.TransactionMetadatum.new_text('msg')).as_list();
    const out: string[] = [];
    for (let i = 0; i < list.len(); i++) out.push(list.get(i).as_text());
    return out;
  } catch {
    return undefined;
  }
}

/** Starts a Blockfrost-speaking responder on 127.0.0.1. */
export async function startCardanoResponder(
  o: {
    networkId?: number;
    projectId?: string;
    parameters?: Partial<CardanoParameters>;
    port?: number;
    /** The tip's slot at start. */
    slot?: number;
  } = {},
): Promise<CardanoResponder> {
  const networkId = o.networkId ?? 0;
  const parameters: CardanoParameters = { ...MAINNET_PARAMETERS, ...(o.parameters ?? {}) };
  const utxos = new Map<string, CardanoUtxo>(); // `txhash#index`, spent ones kept (consumedBy)
  const knownAddresses = new Set<string>();
  const submitted = new Map<string, CardanoSubmittedTx>();
  /** `fund`'s faucet transactions (no inputs, no CBOR), in blocks like the others. */
  const faucet = new Map<string, CardanoSubmittedTx>();
  const mempool: string[] = [];
  const blocks: CardanoBlock[] = [];
  const requests: CardanoResponder['requests'] = [];
  const genesisTime = 1_596_059_091; // Shelley start on mainnet: slot 4,492,800
  let failures: { times: number; status: number } = { times: 0, status: 503 };
  let hanging = false;
  let mempoolEndpoints = true;
  let after: ((r: { method: string; path: string }) => void) | undefined;
  /** Requests held while the node hangs: each call drops its connection. */
  const hung: Array<() => void> = [];

  const newHash = (): string => randomBytes(32).toString('hex');
  const pushBlock = (slot: number, txs: string[]): CardanoBlock => {
    const prev = blocks[blocks.length - 1];
    const b: CardanoBlock = {
      height: (prev?.height ?? 10_000_000) + 1,
      hash: newHash(),
      slot,
      time: genesisTime + slot - 4_492_800,
      txs,
      previous: prev?.hash ?? null,
    };
    blocks.push(b);
    return b;
  };
  pushBlock(o.slot ?? 140_000_000, []);
  const tipBlock = (): CardanoBlock => blocks[blocks.length - 1]!;

  /** Inputs spent by a mempool transaction (the node's mempool ledger view). */
  const spentInMempool = (): Set<string> => {
    const s = new Set<string>();
    for (const h of mempool) for (const i of submitted.get(h)!.inputs) s.add(`${i.txHash}#${i.index}`);
    return s;
  };

  const fund = (address: string, lovelace: bigint, assets: Record<string, bigint> = {}): string => {
    CSL.Address.from_bech32(address); // refuses what is not an address
    const hash = newHash();
    const b = pushBlock(tipBlock().slot + 1, []);
    utxos.set(`${hash}#0`, {
      txHash: hash,
      index: 0,
      address,
      lovelace,
      assets: { ...assets },
      block: b.hash,
    });
    knownAddresses.add(address);
    // A synthetic funding transaction (no inputs: a faucet), listed by `/txs/{hash}` like any other.
    faucet.set(hash, {
      hash,
      cbor: '',
      inputs: [],
      outputs: [{ address, lovelace, assets: { ...assets } }],
      fee: 0n,
      size: 0,
      signers: [],
      block: { height: b.height, hash: b.hash, slot: b.slot, time: b.time, index: 0 },
    });
    return `${hash}#0`;
  };

  const dropExpired = (slot: number): void => {
    for (let i = mempool.length - 1; i >= 0; i--) {
      const t = submitted.get(mempool[i]!)!;
      if (t.ttl !== undefined && BigInt(slot) >= t.ttl) {
        mempool.splice(i, 1);
        submitted.delete(t.hash);
      }
    }
  };

  const advance = (slots: number): void => {
    const slot = tipBlock().slot + slots;
    dropExpired(slot);
    pushBlock(slot, []);
  };

  const produceBlock = (slots = 20): CardanoBlock => {
    const slot = tipBlock().slot + slots;
    dropExpired(slot);
    const txs = mempool.splice(0, mempool.length);
    const b = pushBlock(slot, txs);
    txs.forEach((h, index) => {
      const t = submitted.get(h)!;
      for (const i of t.inputs) utxos.get(`${i.txHash}#${i.index}`)!.consumedBy = h;
      t.outputs.forEach((out, idx) => {
        utxos.set(`${h}#${idx}`, {
          txHash: h,
          index: idx,
          address: out.address,
          lovelace: out.lovelace,
          assets: { ...out.assets },
          block: b.hash,
        });
        knownAddresses.add(out.address);
      });
      t.block = { height: b.height, hash: b.hash, slot: b.slot, time: b.time, index };
    });
    return b;
  };

  const unspentOf = (address: string): CardanoUtxo[] =>
    [...utxos.values()].filter((u) => u.address === address && !u.consumedBy);

  function submit(raw: Buffer): { status: number; json: unknown } {
    let tx: CSL.FixedTransaction;
    try {
      tx = CSL.FixedTransaction.from_bytes(raw);
    } catch (e) {
      return err(400, `DeserialiseFailure: ${e instanceof Error ? e.message : String(e)}`);
    }
    const body = tx.body();
    const hashObj = tx.transaction_hash();
    const hash = hashObj.to_hex();
    const slot = tipBlock().slot;
    const errors: string[] = [];
    if (body.certs() || body.withdrawals() || body.mint() || body.collateral() || body.voting_procedures()) {
      return err(400, 'this responder takes payments only (no certificates, withdrawals, mint, scripts)');
    }
    // Inputs: exist, unspent on chain and in the mempool.
    const inTxs = body.inputs();
    const inMempool = spentInMempool();
    const inputs: CardanoSubmittedTx['inputs'] = [];
    const bad: string[] = [];
    const inAssets: Record<string, bigint> = {};
    let inLovelace = 0n;
    const needKeys = new Set<string>();
    for (let i = 0; i < inTxs.len(); i++) {
      const ti = inTxs.get(i);
      const ref = `${ti.transaction_id().to_hex()}#${ti.index()}`;
      const u = utxos.get(ref);
      if (!u || u.consumedBy || inMempool.has(ref)) {
        bad.push(txInText(ti.transaction_id().to_hex(), ti.index()));
        continue;
      }
      inputs.push({ txHash: u.txHash, index: u.index, address: u.address, lovelace: u.lovelace });
      inLovelace += u.lovelace;
      addAssets(inAssets, u.assets);
      const cred = CSL.Address.from_bech32(u.address).payment_cred();
      const kh = cred?.to_keyhash();
      if (!kh) return err(400, 'this responder spends key-locked outputs only');
      needKeys.add(kh.to_hex());
    }
    if (bad.length > 0) errors.push(`UtxoFailure (BadInputsUTxO (fromList [${bad.join(',')}]))`);
    // Validity interval: valid while slot < ttl (invalidHereafter), and slot ≥ validity start.
    const ttl = body.ttl_bignum();
    const start = body.validity_start_interval_bignum();
    if ((ttl && BigInt(slot) >= BigInt(ttl.to_str())) || (start && BigInt(slot) < BigInt(start.to_str()))) {
      errors.push(
        `UtxoFailure (OutsideValidityIntervalUTxO (ValidityInterval {invalidBefore = ${start ? `SJust (SlotNo ${start.to_str()})` : 'SNothing'}, invalidHereafter = ${ttl ? `SJust (SlotNo ${ttl.to_str()})` : 'SNothing'}}) (SlotNo ${slot}))`,
      );
    }
    // Witnesses: each signature over the body hash; each input's payment key among them.
    const signers: string[] = [];
    const signedKeys = new Set<string>();
    const vkeys = tx.witness_set().vkeys();
    const invalid: string[] = [];
    for (let i = 0; i < (vkeys?.len() ?? 0); i++) {
      const w = vkeys!.get(i);
      const pk = w.vkey().public_key();
      if (pk.verify(hashObj.to_bytes(), w.signature())) {
        signers.push(pk.to_hex());
        signedKeys.add(pk.hash().to_hex());
      } else {
        invalid.push(`VKey (VerKeyEd25519DSIGN "${pk.to_hex()}")`);
      }
    }
    if (invalid.length > 0) errors.push(`InvalidWitnessesUTXOW [${invalid.join(',')}]`);
    const missing = [...needKeys].filter((k) => !signedKeys.has(k));
    if (missing.length > 0) {
      errors.push(
        `MissingVKeyWitnessesUTXOW (fromList [${missing.map((k) => `KeyHash {unKeyHash = "${k}"}`).join(',')}])`,
      );
    }
    // Auxiliary data and its hash in the body.
    const aux = tx.auxiliary_data();
    const auxHash = body.auxiliary_data_hash();
    if (aux && !auxHash) errors.push('MissingTxBodyMetadataHash');
    if (!aux && auxHash) errors.push(`MissingTxMetadata (TxAuxDataHash ${auxHash.to_hex()})`);
    if (aux && auxHash && CSL.hash_auxiliary_data(aux).to_hex() !== auxHash.to_hex()) {
      errors.push('ConflictingMetadataHash');
    }
    // Outputs: network, min-UTxO, value.
    const outs = body.outputs();
    const outputs: CardanoSubmittedTx['outputs'] = [];
    const outAssets: Record<string, bigint> = {};
    let outLovelace = 0n;
    const small: string[] = [];
    const wrongNet: string[] = [];
    const dataCost = CSL.DataCost.new_coins_per_byte(CSL.BigNum.from_str(parameters.coins_per_utxo_size));
    for (let i = 0; i < outs.len(); i++) {
      const out = outs.get(i);
      const addr = out.address();
      const v = valueOf(out.amount());
      if (addr.network_id() !== networkId) wrongNet.push(addr.to_bech32());
      const min = BigInt(CSL.min_ada_for_output(out, dataCost).to_str());
      if (v.lovelace < min) small.push(`(${addr.to_hex()}, ${v.lovelace} < ${min})`);
      outputs.push({ address: addr.to_bech32(), ...v });
      outLovelace += v.lovelace;
      addAssets(outAssets, v.assets);
    }
    if (wrongNet.length > 0)
      errors.push(`UtxoFailure (WrongNetwork Testnet (fromList [${wrongNet.join(',')}]))`);
    if (small.length > 0) errors.push(`UtxoFailure (BabbageOutputTooSmallUTxO [${small.join(',')}])`);
    const fee = BigInt(body.fee().to_str());
    if (bad.length === 0 && (inLovelace !== outLovelace + fee || !assetsEqual(inAssets, outAssets))) {
      errors.push(
        `UtxoFailure (ValueNotConservedUTxO (Mismatch {mismatchSupplied = MaryValue (Coin ${inLovelace}) (MultiAsset (fromList [])), mismatchExpected = MaryValue (Coin ${outLovelace + fee}) (MultiAsset (fromList []))}))`,
      );
    }
    // Fee and size: the ledger's linear fee over the transaction's bytes.
    const minFee = BigInt(parameters.min_fee_a) * BigInt(raw.length) + BigInt(parameters.min_fee_b);
    if (fee < minFee) {
      errors.push(
        `UtxoFailure (FeeTooSmallUTxO (Mismatch {mismatchSupplied = Coin ${fee}, mismatchExpected = Coin ${minFee}}))`,
      );
    }
    if (raw.length > parameters.max_tx_size) {
      errors.push(
        `UtxoFailure (MaxTxSizeUTxO (Mismatch {mismatchSupplied = ${raw.length}, mismatchExpected = ${parameters.max_tx_size}}))`,
      );
    }
    if (errors.length > 0) return txFailure(...errors);
    const t: CardanoSubmittedTx = {
      hash,
      cbor: raw.toString('hex'),
      inputs,
      outputs,
      fee,
      size: raw.length,
      signers,
    };
    if (ttl) t.ttl = BigInt(ttl.to_str());
    const memo = cip20(aux);
    if (memo) t.memo = memo;
    submitted.set(hash, t);
    mempool.push(hash);
    return { status: 200, json: hash };
  }

  /** A transaction's content as Blockfrost describes it (`/txs/{hash}` and `/mempool/{hash}` share it). */
  function txContent(t: CardanoSubmittedTx) {
    return {
      output_amount: amountJson(
        t.outputs.reduce((s, x) => s + x.lovelace, 0n),
        t.outputs.reduce<Record<string, bigint>>((s, x) => {
          addAssets(s, x.assets);
          return s;
        }, {}),
      ),
      fees: t.fee.toString(),
      deposit: '0',
      size: t.size,
      invalid_before: null,
      invalid_hereafter: t.ttl !== undefined ? t.ttl.toString() : null,
      utxo_count: t.inputs.length + t.outputs.length,
      withdrawal_count: 0,
      mir_cert_count: 0,
      delegation_count: 0,
      stake_cert_count: 0,
      pool_update_count: 0,
      pool_retire_count: 0,
      asset_mint_or_burn_count: 0,
      redeemer_count: 0,
      valid_contract: true,
    };
  }

  function txJson(t: CardanoSubmittedTx): unknown {
    const b = t.block!;
    return {
      hash: t.hash,
      block: b.hash,
      block_height: b.height,
      block_time: b.time,
      slot: b.slot,
      index: b.index,
      ...txContent(t),
    };
  }

  function route(method: string, path: string, query: URLSearchParams, body: Buffer, ctype: string) {
    let m: RegExpMatchArray | null;
    if (method === 'GET' && path === '/blocks/latest') {
      const b = tipBlock();
      return {
        status: 200,
        json: {
          time: b.time,
          height: b.height,
          hash: b.hash,
          slot: b.slot,
          epoch: Math.floor((b.slot - 4_492_800) / 432_000) + 208,
          epoch_slot: (b.slot - 4_492_800) % 432_000,
          slot_leader: 'pool1pu5jlj4q9w9jlxeu370a3c9myx47md5j5m2str0naunn2q3lkdy',
          size: 1024,
          tx_count: b.txs.length,
          output: null,
          fees: null,
          block_vrf: 'vrf_vk1wf2k6lhujezqcfe00l6zetxpnmh9n6mwhpmhm0dvfh3fxgmdnrfqkms8ty',
          op_cert: null,
          op_cert_counter: null,
          previous_block: b.previous,
          next_block: null,
          confirmations: 0,
        },
      };
    }
    if (method === 'GET' && path === '/epochs/latest/parameters') return { status: 200, json: parameters };
    if (method === 'GET' && (m = path.match(/^\/addresses\/([^/]+)\/utxos$/))) {
      const address = decodeURIComponent(m[1]!);
      try {
        CSL.Address.from_bech32(address);
      } catch {
        return err(400, 'Invalid address for this network.');
      }
      if (!knownAddresses.has(address)) return NOT_FOUND();
      const count = Math.min(Number(query.get('count') ?? 100), 100);
      const page = Math.max(Number(query.get('page') ?? 1), 1);
      let list = unspentOf(address);
      if (query.get('order') === 'desc') list = list.reverse();
      return {
        status: 200,
        json: list.slice((page - 1) * count, page * count).map((u) => ({
          address: u.address,
          tx_hash: u.txHash,
          tx_index: u.index,
          output_index: u.index,
          amount: amountJson(u.lovelace, u.assets),
          block: u.block,
          data_hash: null,
          inline_datum: null,
          reference_script_hash: null,
        })),
      };
    }
    if (method === 'GET' && (m = path.match(/^\/txs\/([0-9a-f]{64})(\/cbor|\/utxos)?$/))) {
      const t = submitted.get(m[1]!) ?? faucet.get(m[1]!);
      if (!t?.block) return NOT_FOUND();
      if (m[2] === '/cbor') return { status: 200, json: { cbor: t.cbor } };
      if (m[2] === '/utxos') {
        return {
          status: 200,
          json: {
            hash: t.hash,
            inputs: t.inputs.map((i) => ({
              address: i.address,
              amount: amountJson(i.lovelace, utxos.get(`${i.txHash}#${i.index}`)!.assets),
              tx_hash: i.txHash,
              output_index: i.index,
              data_hash: null,
              inline_datum: null,
              reference_script_hash: null,
              collateral: false,
              reference: false,
            })),
            outputs: t.outputs.map((x, idx) => ({
              address: x.address,
              amount: amountJson(x.lovelace, x.assets),
              output_index: idx,
              data_hash: null,
              inline_datum: null,
              collateral: false,
              reference_script_hash: null,
              consumed_by_tx: utxos.get(`${t.hash}#${idx}`)?.consumedBy ?? null,
            })),
          },
        };
      }
      return { status: 200, json: txJson(t) };
    }
    if (!mempoolEndpoints && path.startsWith('/mempool')) {
      return err(404, 'Invalid path. Please check https://docs.blockfrost.io/');
    }
    if (method === 'GET' && (m = path.match(/^\/mempool\/([0-9a-f]{64})$/))) {
      const h = m[1]!;
      if (!mempool.includes(h)) return NOT_FOUND();
      const t = submitted.get(h)!;
      return {
        status: 200,
        json: {
          tx: { hash: h, ...txContent(t) },
          inputs: t.inputs.map((i) => ({
            address: i.address,
            tx_hash: i.txHash,
            output_index: i.index,
            collateral: false,
            reference: false,
          })),
          outputs: t.outputs.map((x, idx) => ({
            address: x.address,
            amount: amountJson(x.lovelace, x.assets),
            output_index: idx,
            data_hash: null,
            inline_datum: null,
            collateral: false,
            reference_script_hash: null,
          })),
          redeemers: [],
        },
      };
    }
    if (path === '/tx/submit') {
      if (method !== 'POST') return err(400, 'Invalid method.');
      if (ctype.split(';')[0]!.trim() !== 'application/cbor') {
        return err(415, 'Invalid Content-Type header. Expected "application/cbor".');
      }
      return submit(body);
    }
    return err(404, 'Invalid path. Please check https://docs.blockfrost.io/');
  }

  const handle = (req: ResponderRequest): ResponderAnswer | Promise<ResponderAnswer> => {
    if (hanging) return new Promise((resolve) => hung.push(() => resolve({ status: 0, drop: true })));
    const { method, path } = req;
    requests.push({ method, path, headers: req.headers });
    const answer = (a: ResponderAnswer): ResponderAnswer => {
      after?.({ method, path });
      return a;
    };
    if (o.projectId !== undefined) {
      const pid = req.headers.project_id;
      if (pid === undefined) {
        return answer(err(403, 'Missing project token. Please include project_id in your request.'));
      }
      if (pid !== o.projectId) return answer(err(403, 'Invalid project token.'));
    }
    if (failures.times > 0) {
      failures.times--;
      return answer(err(failures.status, 'An unexpected response was received from the backend.'));
    }
    try {
      return answer(route(method, path, req.query, req.rawBody, String(req.headers['content-type'] ?? '')));
    } catch (e) {
      return answer(err(500, e instanceof Error ? e.message : String(e)));
    }
  };
  const running = await serve(handle, { prefix: PREFIX, ...(o.port ? { port: o.port } : {}) });
  const port = running.port;

  return {
    url: running.url,
    port,
    networkId,
    parameters,
    fund,
    advance,
    produceBlock,
    mempoolApi: (on) => {
      mempoolEndpoints = on;
    },
    afterAnswer: (fn) => {
      after = fn;
    },
    tip: () => ({ slot: tipBlock().slot, height: tipBlock().height, hash: tipBlock().hash }),
    submitted,
    mempool: () => [...mempool],
    utxosOf: unspentOf,
    balanceOf: (a) => unspentOf(a).reduce((s, u) => s + u.lovelace, 0n),
    failNext: (times, status = 503) => {
      failures = { times, status };
    },
    hang: (on) => {
      hanging = on;
      if (!on) for (const drop of hung.splice(0)) drop();
    },
    requests,
    close: () => {
      for (const drop of hung.splice(0)) drop();
      return running.close();
    },
  };
}
