import { InvalidArgumentError } from '@custos/service-kit';
import type { ChainRecord } from '../../chains/chain-types.js';
import {
  insufficientFunds,
  parseTransferAmount,
  type PreparedTransfer,
  type SignedTransfer,
  type TransferInput,
  type TransferOps,
} from '../../keys/chain-adapter.js';
import {
  type BitcoinNetworkName,
  ECPair,
  bitcoin,
  dustThreshold,
  ecc,
  networkNameOf,
  otherNetworkOf,
  paramsOf,
  standardScript,
} from './bitcoin-lib.js';
import { publicKeyBytes } from './bitcoin-keys.js';
import { broadcastTx, fetchFeeRate, fetchUtxos, txStatus } from './bitcoin-node.js';

/** What `sign` signs: a PSBT (base64) whose inputs carry their witness UTXOs, and its network. */
export interface BitcoinUnsigned {
  psbt: string;
  network: BitcoinNetworkName;
}

/** `fee_rate_sat_per_vbyte`'s bounds (bitcoind's default maxfeerate is 10,000 sat/vB). */
export const MIN_FEE_RATE = 1;
export const MAX_FEE_RATE = 10_000;
/** A transfer whose fee is above this (0.01 BTC) is refused, whatever the rate. */
export const MAX_FEE_SAT = 1_000_000n;
/** At most this many inputs (a standard transaction stays far under 100,000 vB). */
export const MAX_INPUTS = 500;
/** BTC has 8 decimals (1 BTC = 100,000,000 sat), whatever the registry's `native_decimals` says. */
export const SAT_DECIMALS = 8;

/** Fields of the request this family does not take, as the API names them. */
const UNSUPPORTED: [keyof TransferInput, string][] = [
  ['memo', 'memo'],
  ['destinationTag', 'destination_tag'],
  ['feeLimitSun', 'fee_limit_sun'],
  ['tokenMint', 'token_mint'],
  ['tokenDecimals', 'token_decimals'],
  ['ttl', 'ttl'],
];

function varintSize(n: number): number {
  return n < 0xfd ? 1 : n <= 0xffff ? 3 : 5;
}

/**
 * The virtual size of a transaction spending `inputs` P2WPKH outputs to `outputs` scripts, with
 * the largest signature (73 bytes with its sighash byte), so the real one is never bigger.
 */
export function estimateVsize(inputs: number, outputs: Uint8Array[]): number {
  const base =
    4 +
    varintSize(inputs) +
    inputs * (32 + 4 + 1 + 4) +
    varintSize(outputs.length) +
    outputs.reduce((s, o) => s + 8 + varintSize(o.length) + o.length, 0) +
    4;
  const witness = 2 + inputs * (1 + 1 + 73 + 1 + 33);
  return Math.ceil((base * 4 + witness) / 4);
}

function feeFor(vsize: number, rate: number): bigint {
  return BigInt(Math.ceil(vsize * rate));
}

/** The recipient's output script on the chain's network; 400 `to` otherwise. */
function recipientScript(to: string, chain: ChainRecord): Uint8Array {
  const net = networkNameOf(chain);
  const script = standardScript(to, paramsOf(net));
  if (script) return script;
  const other = otherNetworkOf(to, net);
  if (other) {
    throw new InvalidArgumentError('to', `is a Bitcoin ${other} address; chain ${chain.name} is on ${net}`);
  }
  throw new InvalidArgumentError(
    'to',
    `is not a valid Bitcoin address for ${net} (P2PKH, P2SH, P2WPKH, P2WSH or P2TR, checksum included)`,
  );
}

export const bitcoinTransfers: TransferOps<BitcoinUnsigned> = {
  parse(input: TransferInput, chain: ChainRecord): TransferInput {
    if (input.data !== undefined && input.data !== '' && input.data !== '0x') {
      throw new InvalidArgumentError('data', 'is not supported on Bitcoin chains');
    }
    for (const [k, field] of UNSUPPORTED) {
      const v = input[k];
      // An empty string is no value (as an absent field).
      if (v !== undefined && v !== null && v !== '') {
        throw new InvalidArgumentError(field, 'is not supported on Bitcoin chains');
      }
    }
    const network = paramsOf(networkNameOf(chain));
    const script = recipientScript(input.to, chain);
    const value = parseTransferAmount(input.value, SAT_DECIMALS);
    const dust = dustThreshold(script);
    if (value < dust) {
      throw new InvalidArgumentError(
        'value',
        `is below the dust limit of ${dust} sat for this recipient's output`,
      );
    }
    const rate = input.feeRateSatPerVbyte;
    if (rate !== undefined && !(Number.isFinite(rate) && rate >= MIN_FEE_RATE && rate <= MAX_FEE_RATE)) {
      throw new InvalidArgumentError(
        'fee_rate_sat_per_vbyte',
        `must be a number from ${MIN_FEE_RATE} to ${MAX_FEE_RATE} (sat/vB)`,
      );
    }
    return { ...input, to: bitcoin.address.fromOutputScript(script, network) };
  },

  async prepare(ctx, input): Promise<PreparedTransfer<BitcoinUnsigned>> {
    const chain = ctx.endpoint.chain;
    const parsed = bitcoinTransfers.parse(input, chain);
    const netName = networkNameOf(chain);
    const network = paramsOf(netName);
    const toScript = recipientScript(parsed.to, chain);
    const value = parseTransferAmount(parsed.value, SAT_DECIMALS);
    const ownScript = bitcoin.payments.p2wpkh({ pubkey: publicKeyBytes(ctx.key), network }).output!;
    if (bitcoin.address.fromOutputScript(ownScript, network) !== ctx.from) {
      throw new Error("the key's address on this chain is not its P2WPKH address");
    }
    const rateFromRequest = parsed.feeRateSatPerVbyte !== undefined;
    const rate = parsed.feeRateSatPerVbyte ?? (await fetchFeeRate(ctx.endpoint));
    const [utxos, inUse] = await Promise.all([fetchUtxos(ctx.endpoint, ctx.from), ctx.inputsInUse()]);

    // Spendable: confirmed (1 confirmation) and not held by another transaction of the key.
    // Largest first: the fewest inputs (and fee) for the amount.
    let unconfirmed = 0n;
    let held = 0n;
    const spendable = utxos
      .filter((u) => {
        if (inUse.has(`${u.txid}:${u.vout}`)) {
          held += BigInt(u.value);
          return false;
        }
        if (!u.status.confirmed) {
          unconfirmed += BigInt(u.value);
          return false;
        }
        return true;
      })
      .sort((a, b) => b.value - a.value || a.txid.localeCompare(b.txid) || a.vout - b.vout);

    const changeDust = dustThreshold(ownScript);
    const chosen: typeof spendable = [];
    let total = 0n;
    let plan: { fee: bigint; change: bigint; vsize: number } | undefined;
    let lastFee = feeFor(estimateVsize(1, [toScript]), rate);
    for (const u of spendable) {
      if (chosen.length >= MAX_INPUTS) break;
      chosen.push(u);
      total += BigInt(u.value);
      const vWith = estimateVsize(chosen.length, [toScript, ownScript]);
      const feeWith = feeFor(vWith, rate);
      if (total >= value + feeWith && total - value - feeWith >= changeDust) {
        plan = { fee: feeWith, change: total - value - feeWith, vsize: vWith };
        break;
      }
      const vWithout = estimateVsize(chosen.length, [toScript]);
      const feeWithout = feeFor(vWithout, rate);
      lastFee = feeWithout;
      if (total >= value + feeWithout) {
        // The rest is below the change output's dust limit: it goes to the fee.
        plan = { fee: total - value, change: 0n, vsize: vWithout };
        break;
      }
    }
    const all = spendable.reduce((sum, u) => sum + BigInt(u.value), 0n);
    // Cut off at MAX_INPUTS while all the UTXOs would hold enough: say so (not insufficient funds).
    if (!plan && chosen.length >= MAX_INPUTS && spendable.length > MAX_INPUTS && all >= value + lastFee) {
      throw new InvalidArgumentError(
        'value',
        `the key has too many small UTXOs on ${chain.name}: its ${MAX_INPUTS} largest confirmed UTXOs ` +
          `(the most one transfer spends) hold ${total} sat, less than ${value} sat plus a fee of at least ` +
          `${lastFee} sat at ${rate} sat/vB (all ${spendable.length} spendable UTXOs hold ${all} sat); ` +
          `send at most what ${MAX_INPUTS} UTXOs hold, or consolidate the key's UTXOs`,
      );
    }
    if (!plan) {
      const notCounted = [
        unconfirmed > 0n ? `${unconfirmed} sat unconfirmed` : '',
        held > 0n ? `${held} sat held by the key's pending transactions` : '',
      ].filter(Boolean);
      throw insufficientFunds(
        `the key's spendable balance on ${chain.name} is ${total} sat in ${chosen.length} confirmed UTXO(s)` +
          `${notCounted.length ? ` (not counted: ${notCounted.join(', ')})` : ''}` +
          `; the transfer needs ${value} sat plus a fee of at least ${lastFee} sat at ${rate} sat/vB`,
      );
    }
    const feeField = rateFromRequest ? 'fee_rate_sat_per_vbyte' : 'value';
    if (plan.fee > MAX_FEE_SAT) {
      throw new InvalidArgumentError(
        feeField,
        `the fee would be ${plan.fee} sat (${rate} sat/vB, ${chosen.length} inputs), more than the ${MAX_FEE_SAT} sat Custos allows`,
      );
    }
    if (plan.fee * 2n > value) {
      throw new InvalidArgumentError(
        feeField,
        `the fee would be ${plan.fee} sat (${rate} sat/vB), more than half the amount of ${value} sat: send more${rateFromRequest ? ' or use a lower fee rate' : ''}`,
      );
    }

    const psbt = new bitcoin.Psbt({ network });
    for (const u of chosen) {
      psbt.addInput({
        hash: u.txid,
        index: u.vout,
        sequence: 0xffffffff,
        witnessUtxo: { script: ownScript, value: BigInt(u.value) },
      });
    }
    psbt.addOutput({ script: toScript, value });
    if (plan.change > 0n) psbt.addOutput({ script: ownScript, value: plan.change });
    return {
      unsigned: { psbt: psbt.toBase64(), network: netName },
      to: parsed.to,
      value,
      fee: plan.fee,
      inputs: chosen.map((u) => `${u.txid}:${u.vout}`),
      details: {
        fee_rate: rate,
        fee_rate_source: rateFromRequest ? 'request' : 'fee-estimates',
        vsize: plan.vsize,
        change: Number(plan.change),
        inputs: chosen.length,
      },
    };
  },

  sign(privateKey, prepared, o): SignedTransfer {
    const netName = networkNameOf(o.chain);
    if (prepared.unsigned.network !== netName) {
      throw new Error(
        `the transfer was prepared for ${prepared.unsigned.network}, chain ${o.chain.name} is ${netName}`,
      );
    }
    const network = paramsOf(netName);
    const pub = publicKeyBytes(o.key);
    const signer = ECPair.fromPrivateKey(privateKey, { network, compressed: true });
    if (Buffer.compare(Buffer.from(signer.publicKey), pub) !== 0) {
      throw new Error('the private key does not match the key the transfer was prepared for');
    }
    const ownScript = Buffer.from(bitcoin.payments.p2wpkh({ pubkey: pub, network }).output!);
    const psbt = bitcoin.Psbt.fromBase64(prepared.unsigned.psbt, { network });
    // What is signed is what was prepared: our inputs, the recipient's output, change to us, the fee.
    let valueIn = 0n;
    for (const input of psbt.data.inputs) {
      const w = input.witnessUtxo;
      if (!w || Buffer.compare(Buffer.from(w.script), ownScript) !== 0) {
        throw new Error("the transfer spends an input that is not the key's P2WPKH output");
      }
      valueIn += w.value;
    }
    const outs = psbt.txOutputs;
    const first = outs[0];
    if (!first || first.address !== prepared.to || first.value !== prepared.value) {
      throw new Error("the transfer's first output is not the prepared recipient and amount");
    }
    if (outs.slice(1).some((out) => Buffer.compare(Buffer.from(out.script), ownScript) !== 0)) {
      throw new Error('the transfer pays an output other than the recipient and its change');
    }
    const valueOut = outs.reduce((s, out) => s + out.value, 0n);
    if (valueIn - valueOut !== prepared.fee) throw new Error("the transfer's fee is not the prepared fee");

    psbt.signAllInputs(signer);
    const valid = psbt.validateSignaturesOfAllInputs((pubkey, msghash, signature) =>
      ecc.verify(msghash, pubkey, signature, true),
    );
    if (!valid) throw new Error('a signature of the transfer did not verify');
    psbt.finalizeAllInputs();
    // The fee was checked by prepare (rate and caps); bitcoinjs-lib's own rate check is not used.
    const tx = psbt.extractTransaction(true);
    return { signedTx: tx.toHex(), txHash: tx.getId() };
  },

  broadcast(endpoint, signed) {
    return broadcastTx(endpoint, signed.signedTx, signed.txHash);
  },

  status(endpoint, t) {
    return txStatus(endpoint, t.txHash, t.signedTx);
  },
};
