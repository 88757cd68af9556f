import { createHash, randomBytes } from 'node:crypto';
import * as ecc from '@bitcoinerlab/secp256k1';
import type * as B from 'bitcoinjs-lib' with { 'resolution-mode': 'import' };
import { type ResponderAnswer, type ResponderRequest, type RunningResponder, serve } from './server.js';

// A Bitcoin node behind an Esplora HTTP API (as electrs serves it under `/api`): a UTXO set, a
// mempool and blocks that tests fund and mine. `POST /tx` checks a transaction as bitcoind's
// mempool acceptance would (decode, standardness/dust, conflicts, missing inputs, amounts, relay
// fee, then every input's signature) and answers with bitcoind's error text. Transactions are
// decoded and their BIP-143 sighashes computed by bitcoinjs-lib, signatures checked with
// @bitcoinerlab/secp256k1.

// bitcoinjs-lib 7 is an ES module package with a CommonJS build: load that build, typed by the package.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const bitcoin = require('bitcoinjs-lib') as typeof B;
bitcoin.initEccLib(ecc);

/** The network names the responder can be started for. */
export type BitcoinNetworkName = 'mainnet' | 'testnet' | 'signet' | 'regtest';

const NETWORKS: Record<BitcoinNetworkName, B.networks.Network> = {
  mainnet: bitcoin.networks.bitcoin,
  testnet: bitcoin.networks.testnet,
  signet: bitcoin.networks.testnet,
  regtest: bitcoin.networks.regtest,
};

/** bitcoind's dust relay fee: 3 sat/vB (3,000 sat/kvB). */
const DUST_RELAY_SAT_PER_VB = 3n;
/** bitcoind's minimum relay fee: 1 sat/vB. */
const MIN_RELAY_SAT_PER_VB = 1n;
/** `sendrawtransaction`'s default maxfeerate: 0.10 BTC/kvB = 10,000 sat/vB. */
const MAX_FEE_SAT_PER_VB = 10_000n;

/** True for a witness program output (OP_0..OP_16 then one push of 2..40 bytes). */
function isWitnessProgram(script: Uint8Array): boolean {
  if (script.length < 4 || script.length > 42) return false;
  const v = script[0]!;
  if (v !== 0x00 && (v < 0x51 || v > 0x60)) return false;
  return script[1]! + 2 === script.length;
}

/** bitcoind's GetDustThreshold for an output script (0 for an unspendable OP_RETURN). */
export function dustThreshold(script: Uint8Array): bigint {
  if (script[0] === bitcoin.opcodes.OP_RETURN) return 0n;
  const len = script.length;
  const varint = len < 0xfd ? 1 : len <= 0xffff ? 3 : 5;
  let size = 8 + varint + len;
  size += isWitnessProgram(script) ? 32 + 4 + 1 + Math.floor(107 / 4) + 4 : 32 + 4 + 1 + 107 + 4;
  return BigInt(size) * DUST_RELAY_SAT_PER_VB;
}

interface Utxo {
  txid: string;
  vout: number;
  value: bigint;
  script: Uint8Array;
}

interface Block {
  height: number;
  hash: string;
  time: number;
  txids: string[];
}

/** A transaction the responder holds (funding ones included). */
interface HeldTx {
  txid: string;
  hex: string;
  tx: B.Transaction;
  fee: bigint;
  /** The block that confirmed it; undefined while in the mempool. */
  block?: Block | undefined;
  /** The outputs it spent, in input order (empty for a funding transaction). */
  prevouts: Utxo[];
}

/** A transaction accepted by `POST /tx`, after every check passed. */
export interface VerifiedBitcoinTx {
  txid: string;
  hex: string;
  fee: bigint;
  vsize: number;
  inputs: { txid: string; vout: number; value: bigint; address: string | undefined }[];
  outputs: { address: string | undefined; value: bigint; script: string }[];
}

/** A running Bitcoin responder: its URL (the chain's `rpc_url`) and the knobs tests turn. */
export interface BitcoinResponder extends RunningResponder {
  readonly network: BitcoinNetworkName;
  readonly bitcoinjsNetwork: B.networks.Network;
  /** Transactions accepted by `POST /tx`, in order (verified as described above). */
  readonly accepted: VerifiedBitcoinTx[];
  /** Every `POST /tx` refusal, as answered (`sendrawtransaction RPC error: …`). */
  readonly refusals: string[];
  /** A confirmed UTXO of `sats` to `address` (a new block holding a funding transaction). */
  fund(address: string, sats: bigint | number): { txid: string; vout: number };
  /** Mines `n` blocks; the first confirms the whole mempool. Returns the tip height. */
  mine(n?: number): number;
  /** The tip height. */
  height(): number;
  /** The mempool's txids. */
  mempool(): string[];
  /** Confirmed + mempool UTXOs of an address not spent in the mempool, as `GET /address/…/utxo`. */
  utxos(address: string): { txid: string; vout: number; value: bigint; confirmed: boolean }[];
  /** What `GET /fee-estimates` answers (target blocks → sat/vB). */
  feeEstimates: Record<string, number>;
  /**
   * The next `n` requests (those whose `METHOD /path` matches `only`, else any) answer `status`
   * with `text` (503 by default).
   */
  failNext(n: number, status?: number, text?: string, only?: RegExp): void;
  /**
   * Drops a mempool transaction as a node evicting it would (its inputs unspent again, its outputs
   * gone); refused while a mempool transaction spends one of its outputs.
   */
  evict(txid: string): void;
  /** `POST /tx` without HTTP (same checks, same answer), e.g. right after `evict`. */
  submitRaw(hex: string): { status: number; text: string };
  /** While true, requests get no answer at all (the client times out). */
  setUnresponsive(on: boolean): void;
  /** Requests received, as `METHOD /path` (without the prefix). */
  readonly requests: string[];
}

function sha256d(b: Uint8Array): Buffer {
  return createHash('sha256').update(createHash('sha256').update(b).digest()).digest();
}

function hash160(b: Uint8Array): Buffer {
  return createHash('ripemd160').update(createHash('sha256').update(b).digest()).digest();
}

function hex(b: Uint8Array): string {
  return Buffer.from(b).toString('hex');
}

/** bitcoind's error answer as Esplora relays it: HTTP 400, text. */
function rpcError(code: number, message: string): ResponderAnswer {
  return {
    status: 400,
    text: `sendrawtransaction RPC error: ${JSON.stringify({ code, message })}`,
  };
}

/**
 * Starts a Bitcoin node's Esplora API on 127.0.0.1 under `/api` (by default), for `network`
 * (regtest by default: `bcrt1…` addresses).
 */
export async function startBitcoinResponder(
  o: {
    network?: BitcoinNetworkName;
    prefix?: string;
    port?: number;
    /** electrs' `--utxos-limit` (500 by default): more UTXOs on an address → 400 "Too many …". */
    utxosLimit?: number;
  } = {},
): Promise<BitcoinResponder> {
  const utxosLimit = o.utxosLimit ?? 500;
  const networkName = o.network ?? 'regtest';
  const network = NETWORKS[networkName];
  const utxos = new Map<string, Utxo>(); // outpoint → output (confirmed or mempool), unspent
  const spentBy = new Map<string, { txid: string; vin: number }>(); // outpoint → spender
  const txs = new Map<string, HeldTx>();
  const blocks: Block[] = [];
  const accepted: VerifiedBitcoinTx[] = [];
  const refusals: string[] = [];
  const requests: string[] = [];
  let failures: { left: number; status: number; text: string; only?: RegExp | undefined } = {
    left: 0,
    status: 503,
    text: '',
  };
  let unresponsive = false;
  const hanging: (() => void)[] = [];

  const addressOf = (script: Uint8Array): string | undefined => {
    try {
      return bitcoin.address.fromOutputScript(script, network);
    } catch {
      return undefined;
    }
  };

  const newBlock = (txids: string[]): Block => {
    const prev = blocks[blocks.length - 1];
    const height = prev ? prev.height + 1 : 0;
    const hash = hex(sha256d(Buffer.concat([randomBytes(32), Buffer.from(String(height))])).reverse());
    const block: Block = { height, hash, time: Math.floor(Date.now() / 1000), txids };
    blocks.push(block);
    for (const id of txids) {
      const t = txs.get(id);
      if (t) t.block = block;
    }
    return block;
  };
  newBlock([]); // genesis

  const tipHeight = () => blocks[blocks.length - 1]!.height;
  const mempoolTxids = () => [...txs.values()].filter((t) => !t.block).map((t) => t.txid);

  const statusOf = (b: Block | undefined) =>
    b
      ? { confirmed: true, block_height: b.height, block_hash: b.hash, block_time: b.time }
      : { confirmed: false };

  const utxosOf = (address: string) => {
    const script = bitcoin.address.toOutputScript(address, network);
    const out: { txid: string; vout: number; value: bigint; confirmed: boolean; block?: Block }[] = [];
    for (const u of utxos.values()) {
      if (Buffer.compare(Buffer.from(u.script), Buffer.from(script)) !== 0) continue;
      const t = txs.get(u.txid);
      out.push({ txid: u.txid, vout: u.vout, value: u.value, confirmed: !!t?.block, block: t?.block });
    }
    return out;
  };

  const fund = (address: string, sats: bigint | number) => {
    const script = bitcoin.address.toOutputScript(address, network);
    const tx = new bitcoin.Transaction();
    tx.version = 2;
    // A coinbase-shaped input (null prevout) whose script is unique, so every funding txid differs.
    tx.addInput(Buffer.alloc(32), 0xffffffff, 0xffffffff, randomBytes(16));
    tx.addOutput(script, BigInt(sats));
    const txid = tx.getId();
    txs.set(txid, { txid, hex: tx.toHex(), tx, fee: 0n, prevouts: [] });
    utxos.set(`${txid}:0`, { txid, vout: 0, value: BigInt(sats), script });
    newBlock([txid]);
    return { txid, vout: 0 };
  };

  const mine = (n = 1) => {
    for (let i = 0; i < n; i++) newBlock(i === 0 ? mempoolTxids() : []);
    return tipHeight();
  };

  /** bitcoind's checks of `sendrawtransaction`, in its order; the txid when accepted. */
  const submit = (body: string): ResponderAnswer => {
    const raw = body.trim();
    let tx: B.Transaction;
    try {
      if (!/^[0-9a-fA-F]+$/.test(raw) || raw.length % 2 !== 0) throw new Error('not hex');
      tx = bitcoin.Transaction.fromHex(raw);
    } catch {
      return rpcError(-22, 'TX decode failed. Make sure the tx has at least one input.');
    }
    if (tx.ins.length === 0 || tx.outs.length === 0) {
      return rpcError(-26, tx.ins.length === 0 ? 'bad-txns-vin-empty' : 'bad-txns-vout-empty');
    }
    const txid = tx.getId();
    const known = txs.get(txid);
    if (known?.block) {
      // bitcoind looks for an unspent output of the transaction in its UTXO set: none left (all
      // spent) → it goes through mempool acceptance, whose inputs are gone.
      if (known.tx.outs.some((_, vout) => utxos.has(`${txid}:${vout}`))) {
        return rpcError(-27, 'Transaction outputs already in utxo set');
      }
      return rpcError(-25, 'bad-txns-inputs-missingorspent');
    }
    if (known) return { status: 200, text: txid }; // already in the mempool: relayed again, as bitcoind does
    if (tx.isCoinbase()) return rpcError(-26, 'coinbase');
    // Standardness: output scripts and dust.
    for (const out of tx.outs) {
      if (out.value < dustThreshold(out.script)) return rpcError(-26, 'dust');
    }
    // Inputs: duplicated, in conflict with the mempool, or missing/spent.
    const seen = new Set<string>();
    const prevouts: Utxo[] = [];
    for (const input of tx.ins) {
      const ref = `${hex(Buffer.from(input.hash).reverse())}:${input.index}`;
      if (seen.has(ref)) return rpcError(-26, 'bad-txns-inputs-duplicate');
      seen.add(ref);
      const spender = spentBy.get(ref);
      if (spender && !txs.get(spender.txid)?.block) return rpcError(-26, 'txn-mempool-conflict');
      const u = utxos.get(ref);
      if (!u) return rpcError(-25, 'bad-txns-inputs-missingorspent');
      prevouts.push(u);
    }
    const valueIn = prevouts.reduce((s, u) => s + u.value, 0n);
    const valueOut = tx.outs.reduce((s, out) => s + out.value, 0n);
    if (valueOut > valueIn) {
      return rpcError(-26, `bad-txns-in-belowout, value in (${valueIn}) < value out (${valueOut})`);
    }
    const fee = valueIn - valueOut;
    const vsize = tx.virtualSize();
    if (fee < BigInt(vsize) * MIN_RELAY_SAT_PER_VB) {
      return rpcError(-26, `min relay fee not met, ${fee} < ${BigInt(vsize) * MIN_RELAY_SAT_PER_VB}`);
    }
    // Scripts: every input is a P2WPKH spend whose signature verifies against its output.
    for (let i = 0; i < tx.ins.length; i++) {
      const input = tx.ins[i]!;
      const u = prevouts[i]!;
      const why = verifyP2wpkhInput(tx, i, input, u);
      if (why) return rpcError(-26, why);
    }
    if (fee > BigInt(vsize) * MAX_FEE_SAT_PER_VB) {
      return rpcError(-25, 'Fee exceeds maximum configured by user (e.g. -maxtxfee, maxfeerate)');
    }
    // Accepted: spend the inputs, add the outputs to the mempool.
    tx.ins.forEach((input, vin) => {
      const ref = `${hex(Buffer.from(input.hash).reverse())}:${input.index}`;
      utxos.delete(ref);
      spentBy.set(ref, { txid, vin });
    });
    tx.outs.forEach((out, vout) => {
      utxos.set(`${txid}:${vout}`, { txid, vout, value: out.value, script: out.script });
    });
    txs.set(txid, { txid, hex: raw.toLowerCase(), tx, fee, prevouts });
    accepted.push({
      txid,
      hex: raw.toLowerCase(),
      fee,
      vsize,
      inputs: prevouts.map((u) => ({
        txid: u.txid,
        vout: u.vout,
        value: u.value,
        address: addressOf(u.script),
      })),
      outputs: tx.outs.map((out) => ({
        address: addressOf(out.script),
        value: out.value,
        script: hex(out.script),
      })),
    });
    return { status: 200, text: txid };
  };

  const txJson = (t: HeldTx) => ({
    txid: t.txid,
    version: t.tx.version,
    locktime: t.tx.locktime,
    vin: t.tx.ins.map((input, i) => {
      const p = t.prevouts[i];
      return {
        txid: hex(Buffer.from(input.hash).reverse()),
        vout: input.index,
        prevout: p
          ? { scriptpubkey: hex(p.script), scriptpubkey_address: addressOf(p.script), value: Number(p.value) }
          : null,
        scriptsig: hex(input.script),
        witness: input.witness.map(hex),
        is_coinbase: t.prevouts.length === 0,
        sequence: input.sequence,
      };
    }),
    vout: t.tx.outs.map((out) => ({
      scriptpubkey: hex(out.script),
      scriptpubkey_address: addressOf(out.script),
      value: Number(out.value),
    })),
    size: t.tx.byteLength(),
    weight: t.tx.weight(),
    fee: Number(t.fee),
    status: statusOf(t.block),
  });

  const feeEstimatesRef = {
    value: {
      '1': 20.5,
      '2': 15.2,
      '3': 10.1,
      '6': 5.3,
      '12': 3.1,
      '144': 1.02,
      '504': 1,
      '1008': 1,
    } as Record<string, number>,
  };

  const isTxid = (s: string) => /^[0-9a-f]{64}$/.test(s);

  const handle = async (req: ResponderRequest): Promise<ResponderAnswer> => {
    requests.push(`${req.method} ${req.path}`);
    if (unresponsive) {
      await new Promise<void>((resolve) => hanging.push(resolve));
      return { status: 503, text: 'unavailable' };
    }
    if (failures.left > 0 && (!failures.only || failures.only.test(`${req.method} ${req.path}`))) {
      failures.left--;
      return { status: failures.status, text: failures.text };
    }
    const parts = req.path.split('/').filter(Boolean);
    const [a, b, c, d] = parts;
    if (req.method === 'POST' && a === 'tx' && parts.length === 1) {
      const answer = submit(req.body);
      if (answer.status !== 200) refusals.push(answer.text ?? '');
      return answer;
    }
    if (req.method !== 'GET') return { status: 404, text: `endpoint does not exist "${req.path}"` };
    if (a === 'fee-estimates' && parts.length === 1) return { status: 200, json: feeEstimatesRef.value };
    if (a === 'blocks' && b === 'tip' && c === 'height' && parts.length === 3) {
      return { status: 200, text: String(tipHeight()) };
    }
    if (a === 'blocks' && b === 'tip' && c === 'hash' && parts.length === 3) {
      return { status: 200, text: blocks[blocks.length - 1]!.hash };
    }
    if (a === 'address' && b && c === 'utxo' && parts.length === 3) {
      try {
        bitcoin.address.toOutputScript(b, network);
      } catch {
        // electrs: a well-formed address of another network, or a malformed one.
        const other = Object.values(NETWORKS).some((n) => {
          try {
            bitcoin.address.toOutputScript(b, n);
            return true;
          } catch {
            return false;
          }
        });
        return { status: 400, text: other ? 'Address on invalid network' : 'Invalid Bitcoin address' };
      }
      const list = utxosOf(b);
      if (list.length > utxosLimit) {
        return {
          status: 400,
          text: `Too many unspent transaction outputs (>${utxosLimit}). Contact support to raise limits.`,
        };
      }
      return {
        status: 200,
        json: list.map((u) => ({
          txid: u.txid,
          vout: u.vout,
          status: statusOf(u.block),
          value: Number(u.value),
        })),
      };
    }
    if (a === 'tx' && b) {
      if (!isTxid(b)) return { status: 400, text: 'Invalid hex string' };
      const t = txs.get(b);
      if (parts.length === 2)
        return t ? { status: 200, json: txJson(t) } : { status: 404, text: 'Transaction not found' };
      if (c === 'hex' && parts.length === 3) {
        return t ? { status: 200, text: t.hex } : { status: 404, text: 'Transaction not found' };
      }
      if (c === 'status' && parts.length === 3) return { status: 200, json: statusOf(t?.block) };
      if (c === 'outspend' && d !== undefined && parts.length === 4) {
        if (!/^\d+$/.test(d)) return { status: 400, text: 'Invalid number' };
        const s = spentBy.get(`${b}:${d}`);
        if (!s) return { status: 200, json: { spent: false } };
        return {
          status: 200,
          json: { spent: true, txid: s.txid, vin: s.vin, status: statusOf(txs.get(s.txid)?.block) },
        };
      }
    }
    return { status: 404, text: `endpoint does not exist "${req.path}"` };
  };

  const running = await serve(handle, { prefix: o.prefix ?? '/api', ...(o.port ? { port: o.port } : {}) });
  const release = () => {
    for (const r of hanging.splice(0)) r();
  };

  return {
    ...running,
    close: async () => {
      unresponsive = false;
      release();
      await running.close();
    },
    network: networkName,
    bitcoinjsNetwork: network,
    accepted,
    refusals,
    requests,
    fund,
    mine,
    height: tipHeight,
    mempool: mempoolTxids,
    utxos: (address) =>
      utxosOf(address).map(({ txid, vout, value, confirmed }) => ({ txid, vout, value, confirmed })),
    get feeEstimates() {
      return feeEstimatesRef.value;
    },
    set feeEstimates(v: Record<string, number>) {
      feeEstimatesRef.value = v;
    },
    failNext(n, status = 503, text = 'Service Unavailable', only) {
      failures = { left: n, status, text, only };
    },
    evict(txid) {
      const t = txs.get(txid);
      if (!t || t.block) throw new Error(`${txid} is not in the mempool`);
      t.tx.outs.forEach((_, vout) => {
        if (spentBy.has(`${txid}:${vout}`)) throw new Error(`an output of ${txid} is spent in the mempool`);
      });
      t.tx.outs.forEach((_, vout) => utxos.delete(`${txid}:${vout}`));
      t.tx.ins.forEach((input, i) => {
        const ref = `${hex(Buffer.from(input.hash).reverse())}:${input.index}`;
        spentBy.delete(ref);
        const u = t.prevouts[i]!;
        utxos.set(ref, u);
      });
      txs.delete(txid);
    },
    submitRaw(rawHex) {
      const a = submit(rawHex);
      if (a.status !== 200) refusals.push(a.text ?? '');
      return { status: a.status, text: a.text ?? '' };
    },
    setUnresponsive(on) {
      unresponsive = on;
      if (!on) release();
    },
  };
}

/** secp256k1's group order. */
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/**
 * Why input `i` (spending the P2WPKH output `u`) does not verify, as bitcoind words its script
 * error; undefined when its witness holds a valid low-S signature of the key the output pays.
 */
function verifyP2wpkhInput(
  tx: B.Transaction,
  i: number,
  input: B.Transaction['ins'][number],
  u: Utxo,
): string | undefined {
  const failed = (why: string) => `mandatory-script-verify-flag-failed (${why})`;
  const s = u.script;
  if (!(s.length === 22 && s[0] === 0x00 && s[1] === 0x14)) {
    return failed('the responder verifies P2WPKH spends only');
  }
  if (input.script.length !== 0) return failed('Witness requires empty scriptSig');
  if (input.witness.length !== 2) return failed('Witness program hash mismatch');
  const [sigBytes, pubkey] = input.witness as [Uint8Array, Uint8Array];
  if (pubkey.length !== 33 || !ecc.isPoint(pubkey)) return failed('Using non-compressed keys in segwit');
  if (Buffer.compare(hash160(pubkey), Buffer.from(s.subarray(2))) !== 0) {
    return failed('Witness program hash mismatch');
  }
  let decoded: { signature: Uint8Array; hashType: number };
  try {
    decoded = bitcoin.script.signature.decode(sigBytes);
  } catch {
    return failed('Non-canonical DER signature');
  }
  const scriptCode = bitcoin.payments.p2pkh({ hash: s.subarray(2) }).output!;
  const sighash = tx.hashForWitnessV0(i, scriptCode, u.value, decoded.hashType);
  const sig = Buffer.from(decoded.signature);
  const sValue = BigInt(`0x${sig.subarray(32).toString('hex')}`);
  if (sValue > N / 2n) {
    // A high S: consensus-valid when its low-S twin verifies, but not standard (LOW_S policy).
    const twin = Buffer.concat([
      sig.subarray(0, 32),
      Buffer.from((N - sValue).toString(16).padStart(64, '0'), 'hex'),
    ]);
    return ecc.verify(sighash, pubkey, twin)
      ? 'non-mandatory-script-verify-flag (Non-canonical signature: S value is unnecessarily high)'
      : failed('Signature must be zero for failed CHECK(MULTI)SIG operation');
  }
  if (!ecc.verify(sighash, pubkey, sig, true)) {
    return failed('Signature must be zero for failed CHECK(MULTI)SIG operation');
  }
  return undefined;
}
