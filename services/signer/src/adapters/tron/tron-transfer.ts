import { InvalidArgumentError } from '@custos/service-kit';
import { utils } from 'tronweb';
import {
  ChainRpcError,
  insufficientFunds,
  parseTransferAmount,
  type ChainEndpoint,
  type PreparedTransfer,
  type SignedTransfer,
  type TransferInput,
  type TransferOps,
  type TransferStatus,
} from '../../keys/chain-adapter.js';
import type { ChainRecord } from '../../chains/chain-types.js';
import { deriveTron, isTronAddress, tronBase58, tronHex } from './tron-keys.js';
import {
  accountOf,
  constantCall,
  contractExists,
  feeParams,
  hexText,
  nowBlock,
  revertReason,
  tronCall,
  type TronBroadcastAnswer,
  type TronTxInfo,
} from './tron-node.js';
import { chainJson } from '../http.js';
import {
  decodeRawTx,
  encodeRawData,
  trc20BalanceOfParameter,
  trc20TransferData,
  txIdOf,
  type TronRawData,
  type TronSignedTx,
  type TronUnsignedTx,
} from './tron-tx.js';

/** TRX has 6 decimals (1 TRX = 1,000,000 sun). */
export const TRX_DECIMALS = 6;
/** A TRC-20 transfer's fee limit when the request gives none: 100 TRX. */
export const DEFAULT_FEE_LIMIT_SUN = 100_000_000;
/** The chain's largest fee limit (15,000 TRX). */
export const MAX_FEE_LIMIT_SUN = 15_000_000_000;
/** The longest memo (`raw_data.data`), in UTF-8 bytes. */
export const MAX_MEMO_BYTES = 512;
/** How long a built transaction stays valid: its `expiration` is this after it is built. */
export const EXPIRATION_MS = 60_000;
/** The largest TRC-20 amount (a uint256). */
export const MAX_UINT256 = (1n << 256n) - 1n;
/** A signed transaction's bandwidth: its bytes plus this (java-tron's MAX_RESULT_SIZE_IN_TX). */
const RESULT_BYTES = 64n;
/** Protobuf framing of the raw data and one 65-byte signature in the signed transaction. */
const SIGNED_OVERHEAD_BYTES = 3n + 2n + 65n;

/** What `prepare` hands to `sign`: the checked unsigned transaction and what it must say. */
export interface TronUnsigned {
  tx: TronUnsignedTx;
  kind: 'trx' | 'trc20';
  /** The sender (`41…`). */
  owner: string;
  /** TRC-20: the token contract (`41…`). */
  contract?: string;
}

/** A memo as `raw_data.data` (hex of its UTF-8 bytes). */
function memoHex(memo: string): string {
  return Buffer.from(memo, 'utf8').toString('hex');
}

/**
 * The TRC-20 amount's decimals: the request's (checked against the contract's) or the contract's;
 * undefined when neither says (a contract without `decimals()` and no `token_decimals`).
 */
async function tokenDecimals(
  ep: ChainEndpoint,
  owner: string,
  contract: string,
  asked: number | undefined,
): Promise<number | undefined> {
  const d = await constantCall(ep, { owner, contract, selector: 'decimals()', parameter: '' });
  let onChain: number | undefined;
  if (d.ok && /^[0-9a-fA-F]{64}$/.test(d.result)) {
    const v = BigInt(`0x${d.result}`);
    if (v <= 77n) onChain = Number(v);
  }
  if (asked !== undefined && onChain !== undefined && asked !== onChain) {
    throw new InvalidArgumentError(
      'token_decimals',
      `is ${asked}, but the token contract says it has ${onChain} decimals`,
    );
  }
  return asked ?? onChain;
}

/** True when `value` is a major-unit amount (a decimal with a fraction), not base units. */
function isMajorUnits(value: string): boolean {
  return !/^[0-9]+$/.test(value);
}

/** Refuses fields a Tron transfer does not have (400 naming the field). */
function refuseForeignFields(input: TransferInput): void {
  if (input.data !== undefined && input.data !== '' && input.data !== '0x') {
    throw new InvalidArgumentError(
      'data',
      'is not supported on Tron chains (TRC-20 transfers use token_mint)',
    );
  }
  if (input.destinationTag !== undefined) {
    throw new InvalidArgumentError('destination_tag', 'is an XRP Ledger field, not supported on Tron chains');
  }
  if (input.feeRateSatPerVbyte !== undefined) {
    throw new InvalidArgumentError(
      'fee_rate_sat_per_vbyte',
      'is a Bitcoin field, not supported on Tron chains',
    );
  }
  if (input.ttl !== undefined) {
    throw new InvalidArgumentError(
      'ttl',
      'is not supported on Tron chains (a transaction expires 60 s after it is built)',
    );
  }
}

function parse(input: TransferInput, _chain: ChainRecord): TransferInput {
  refuseForeignFields(input);
  if (typeof input.to !== 'string' || !isTronAddress(input.to)) {
    throw new InvalidArgumentError('to', 'must be a base58check Tron address (T…)');
  }
  const token = input.tokenMint !== undefined && input.tokenMint !== '';
  if (token && !isTronAddress(input.tokenMint as string)) {
    throw new InvalidArgumentError('token_mint', 'must be the TRC-20 contract address as base58check (T…)');
  }
  if (input.tokenDecimals !== undefined) {
    if (!token)
      throw new InvalidArgumentError('token_decimals', 'is only for TRC-20 transfers (with token_mint)');
    if (!Number.isInteger(input.tokenDecimals) || input.tokenDecimals < 0 || input.tokenDecimals > 77) {
      throw new InvalidArgumentError('token_decimals', 'must be an integer from 0 to 77');
    }
  }
  if (input.feeLimitSun !== undefined) {
    if (!token)
      throw new InvalidArgumentError('fee_limit_sun', 'is only for TRC-20 transfers (with token_mint)');
    if (
      !Number.isInteger(input.feeLimitSun) ||
      input.feeLimitSun < 1 ||
      input.feeLimitSun > MAX_FEE_LIMIT_SUN
    ) {
      throw new InvalidArgumentError('fee_limit_sun', `must be an integer from 1 to ${MAX_FEE_LIMIT_SUN}`);
    }
  }
  if (input.memo !== undefined && input.memo !== '') {
    if (Buffer.byteLength(input.memo, 'utf8') > MAX_MEMO_BYTES) {
      throw new InvalidArgumentError('memo', `is more than ${MAX_MEMO_BYTES} bytes of UTF-8`);
    }
  }
  const raw = String(input.value ?? '');
  if (token) {
    // A TRC-20 amount is a uint256. Its fraction digits are checked against the token's decimals:
    // the request's here, else the contract's once prepare has read them (here: the syntax only).
    const fractionDigits = raw.split('.')[1]?.length ?? 0;
    parseTransferAmount(raw, input.tokenDecimals ?? fractionDigits, 'value', MAX_UINT256);
    return input;
  }
  const v = parseTransferAmount(raw, TRX_DECIMALS);
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new InvalidArgumentError('value', 'is more TRX than a transaction can carry');
  }
  return input;
}

/** The bandwidth fee of a transaction whose raw data is `rawHex`, when the account burns TRX for it. */
function bandwidthFee(rawHex: string, perByte: bigint): bigint {
  return (BigInt(rawHex.length / 2) + SIGNED_OVERHEAD_BYTES + RESULT_BYTES) * perByte;
}

async function prepare(
  ctx: Parameters<TransferOps['prepare']>[0],
  input: TransferInput,
): Promise<PreparedTransfer<TronUnsigned>> {
  parse(input, ctx.endpoint.chain);
  const ep = ctx.endpoint;
  const from = ctx.from;
  const owner = tronHex(from);
  const toHex = tronHex(input.to);
  const token = input.tokenMint !== undefined && input.tokenMint !== '';
  const memo = input.memo !== undefined && input.memo !== '' ? input.memo : undefined;
  const [head, fees, sender] = await Promise.all([nowBlock(ep), feeParams(ep), accountOf(ep, from)]);
  // The node judges expiration by its head block's time: never build on a clock behind it.
  const timestamp = Math.max(Date.now(), head.timestamp);
  const raw: Omit<TronRawData, 'contract'> = {
    // TaPoS: the reference block's height bytes 6..8 and id bytes 8..16.
    ref_block_bytes: head.blockID.slice(12, 16),
    ref_block_hash: head.blockID.slice(16, 32),
    expiration: timestamp + EXPIRATION_MS,
    timestamp,
    ...(memo !== undefined ? { data: memoHex(memo) } : {}),
  };
  const memoFee = memo !== undefined ? fees.memoFee : 0n;
  const details: Record<string, string | number | boolean> = {
    expiration_ms: raw.expiration,
    ref_block: head.number,
  };
  if (memo !== undefined) details.memo = memo;

  if (!token) {
    const value = parseTransferAmount(input.value, TRX_DECIMALS);
    if (toHex === owner)
      throw new InvalidArgumentError('to', 'is the sender: Tron refuses a TRX transfer to yourself');
    const recipient = await accountOf(ep, input.to);
    const rawData: TronRawData = {
      contract: [
        {
          parameter: {
            value: { amount: Number(value), owner_address: owner, to_address: toHex },
            type_url: 'type.googleapis.com/protocol.TransferContract',
          },
          type: 'TransferContract',
        },
      ],
      ...raw,
    };
    const rawHex = encodeRawData(rawData);
    const accountCreation = recipient.exists
      ? 0n
      : fees.createAccountFee + fees.createNewAccountFeeInSystemContract;
    const fee = bandwidthFee(rawHex, fees.transactionFee) + accountCreation + memoFee;
    if (sender.balance < value + fee) {
      throw insufficientFunds(
        `the account holds ${sender.balance} sun; the transfer needs ${value} sun and up to ${fee} sun of fees`,
      );
    }
    details.recipient_activated = recipient.exists;
    return {
      unsigned: {
        tx: { visible: false, txID: txIdOf(rawHex), raw_data: rawData, raw_data_hex: rawHex },
        kind: 'trx',
        owner,
      },
      to: input.to,
      value,
      fee,
      inputs: [],
      expiry: { kind: 'time_ms', value: BigInt(raw.expiration) },
      details,
      // Tron keeps no reserve: the whole balance can be spent.
      available: { native: sender.balance },
    };
  }

  const contractB58 = input.tokenMint as string;
  const contract = tronHex(contractB58);
  if (!(await contractExists(ep, contractB58))) {
    throw new InvalidArgumentError(
      'token_mint',
      'no smart contract is deployed at this address on this chain',
    );
  }
  const decimals = await tokenDecimals(ep, from, contractB58, input.tokenDecimals);
  if (decimals === undefined && isMajorUnits(input.value)) {
    throw new InvalidArgumentError(
      'token_decimals',
      'is required for a decimal amount: the token contract does not answer decimals() (or give value in base units)',
    );
  }
  const value = parseTransferAmount(input.value, decimals ?? 0, 'value', MAX_UINT256);
  const bal = await constantCall(ep, {
    owner: from,
    contract: contractB58,
    selector: 'balanceOf(address)',
    parameter: trc20BalanceOfParameter(owner),
  });
  if (!bal.ok || !/^[0-9a-fA-F]{64}$/.test(bal.result)) {
    throw new ChainRpcError(`balanceOf on ${contractB58} failed${bal.message ? `: ${bal.message}` : ''}`);
  }
  const tokenBalance = BigInt(`0x${bal.result}`);
  if (tokenBalance < value) {
    throw insufficientFunds(
      `the account holds ${tokenBalance} base units of the token; the transfer needs ${value}`,
    );
  }
  const feeLimit = input.feeLimitSun ?? DEFAULT_FEE_LIMIT_SUN;
  const callData = trc20TransferData(toHex, value);
  // The energy a dry run of the transfer uses, priced: more than the fee limit would run out of energy.
  const dry = await constantCall(ep, {
    owner: from,
    contract: contractB58,
    selector: 'transfer(address,uint256)',
    parameter: callData.slice(8),
  });
  if (!dry.ok) {
    // The contract would revert it (blacklisted sender, paused token …): refuse before anything is
    // recorded rather than sign a transfer that can only burn its fee.
    throw new ChainRpcError(
      `the token contract reverts this transfer: ${revertReason(dry.result, dry.message)}`,
      {
        rejected: true,
      },
    );
  }
  const energyFee = dry.energyUsed * fees.energyFee;
  if (energyFee > BigInt(feeLimit)) {
    throw new InvalidArgumentError(
      'fee_limit_sun',
      `is ${feeLimit} sun, but the transfer needs about ${energyFee} sun of energy (${dry.energyUsed} energy)`,
    );
  }
  const rawData: TronRawData = {
    contract: [
      {
        parameter: {
          value: { data: callData, owner_address: owner, contract_address: contract },
          type_url: 'type.googleapis.com/protocol.TriggerSmartContract',
        },
        type: 'TriggerSmartContract',
      },
    ],
    ...raw,
    fee_limit: feeLimit,
  };
  const rawHex = encodeRawData(rawData);
  const bandwidth = bandwidthFee(rawHex, fees.transactionFee);
  // What the sender must hold in TRX: bandwidth, memo and the energy the dry run used.
  const needed = bandwidth + memoFee + energyFee;
  if (sender.balance < needed) {
    throw insufficientFunds(
      `the account holds ${sender.balance} sun; the TRC-20 transfer needs about ${needed} sun of TRX for bandwidth and energy`,
    );
  }
  details.token_mint = contractB58;
  if (decimals !== undefined) details.token_decimals = decimals;
  details.fee_limit_sun = feeLimit;
  details.energy_estimate = Number(dry.energyUsed);
  return {
    unsigned: {
      tx: { visible: false, txID: txIdOf(rawHex), raw_data: rawData, raw_data_hex: rawHex },
      kind: 'trc20',
      owner,
      contract,
    },
    to: input.to,
    value,
    fee: bandwidth + memoFee + BigInt(feeLimit),
    // What it is expected to burn (the dry run's energy): the node caps the energy at the balance,
    // so a key holding less than the fee limit may still send.
    expectedFee: needed,
    inputs: [],
    expiry: { kind: 'time_ms', value: BigInt(raw.expiration) },
    details,
    // Tron keeps no reserve: the whole TRX balance pays fees; the token balance the transfers.
    available: { native: sender.balance, token: tokenBalance },
  };
}

/**
 * Checks that the transaction says what was prepared, from its bytes: the JSON encodes to
 * raw_data_hex, the id is sha256(raw_data_hex), and the decoded contract has the key's address as
 * owner, the recipient, amount (and token contract) of the transfer. Throws otherwise.
 */
export function checkUnsigned(u: TronUnsigned, o: { owner: string; to: string; value: bigint }): void {
  const { tx } = u;
  if (encodeRawData(tx.raw_data) !== tx.raw_data_hex.toLowerCase()) {
    throw new Error('the transaction JSON does not encode to its raw_data_hex');
  }
  if (txIdOf(tx.raw_data_hex) !== tx.txID.toLowerCase()) {
    throw new Error('the transaction id is not sha256(raw_data_hex)');
  }
  const d = decodeRawTx(tx.raw_data_hex);
  if (d.contracts !== 1) throw new Error('the transaction does not hold exactly one contract');
  if (d.owner !== o.owner || u.owner !== o.owner)
    throw new Error("the transaction's owner is not the key's address");
  if (d.to !== tronHex(o.to) || d.amount !== o.value) {
    throw new Error("the transaction's recipient or amount is not the prepared transfer's");
  }
  if (u.kind === 'trx') {
    if (d.type !== 'TransferContract') throw new Error('a TRX transfer must be a TransferContract');
    return;
  }
  if (d.type !== 'TriggerSmartContract' || d.contract !== u.contract) {
    throw new Error('a TRC-20 transfer must call transfer on the prepared token contract');
  }
  if (d.callValue !== 0n || d.callTokenValue !== 0n)
    throw new Error('a TRC-20 transfer must not send TRX or TRC-10');
}

function sign(
  privateKey: Buffer,
  prepared: PreparedTransfer<TronUnsigned>,
  o: Parameters<TransferOps['sign']>[2],
): SignedTransfer {
  const { address } = deriveTron(privateKey);
  if (address !== o.key.address) throw new Error("the private key is not the key's (address mismatch)");
  checkUnsigned(prepared.unsigned, { owner: tronHex(address), to: prepared.to, value: prepared.value });
  const tx = prepared.unsigned.tx;
  const signed = utils.crypto.signTransaction(privateKey, {
    visible: false,
    txID: tx.txID.toLowerCase(),
    raw_data: tx.raw_data,
    raw_data_hex: tx.raw_data_hex.toLowerCase(),
  }) as unknown as TronSignedTx;
  const out: TronSignedTx = {
    visible: false,
    txID: signed.txID,
    raw_data: signed.raw_data,
    raw_data_hex: signed.raw_data_hex,
    signature: signed.signature.map((s) => s.replace(/^0x/, '').toLowerCase()),
  };
  return { signedTx: JSON.stringify(out), txHash: out.txID };
}

/** The broadcast answers that say the node could not act now (not a refusal of this transaction). */
const TRANSIENT_CODES = new Set([
  'SERVER_BUSY',
  'NOT_ENOUGH_EFFECTIVE_CONNECTION',
  'NO_CONNECTION',
  'BLOCK_UNSOLIDIFIED',
  'OTHER_ERROR',
]);

async function broadcast(ep: ChainEndpoint, signed: SignedTransfer): Promise<void> {
  let body: unknown;
  try {
    body = JSON.parse(signed.signedTx);
  } catch {
    throw new ChainRpcError('the signed transaction is not JSON', { rejected: true });
  }
  const a = await chainJson<TronBroadcastAnswer>(ep, {
    method: 'POST',
    path: '/wallet/broadcasttransaction',
    body: JSON.stringify(body),
  });
  if (a === null || typeof a !== 'object') {
    throw new ChainRpcError(`the ${ep.chain.name} node's broadcast answer is not an object`);
  }
  // {"Error": …}: the node could not read the transaction at all.
  if (typeof a.Error === 'string') {
    throw new ChainRpcError(`the ${ep.chain.name} node refused the transaction: ${a.Error.slice(0, 300)}`, {
      rejected: true,
    });
  }
  if (a.result === true) return;
  const code = a.code ?? 'UNKNOWN';
  const message = `the ${ep.chain.name} node refused the transaction: ${code}${a.message ? ` (${hexText(a.message).slice(0, 300)})` : ''}`;
  if (code === 'DUP_TRANSACTION_ERROR') throw new ChainRpcError(message, { alreadyKnown: true });
  if (TRANSIENT_CODES.has(code) || a.code === undefined) throw new ChainRpcError(message);
  throw new ChainRpcError(message, { rejected: true });
}

/** The transfer's contract call data when it is a TRC-20 `transfer` (TriggerSmartContract), else undefined. */
function trc20CallOf(signedTx: string): string | undefined {
  try {
    const s = JSON.parse(signedTx) as Partial<TronSignedTx>;
    const c = s.raw_data?.contract?.[0] as
      | { type?: string; parameter?: { value?: { data?: string } } }
      | undefined;
    const data = c?.type === 'TriggerSmartContract' ? c.parameter?.value?.data : undefined;
    return typeof data === 'string' && /^a9059cbb/i.test(data) ? data : undefined;
  } catch {
    return undefined;
  }
}

async function status(ep: ChainEndpoint, t: Parameters<TransferOps['status']>[1]): Promise<TransferStatus> {
  let expiration: bigint | undefined = t.expiry?.kind === 'time_ms' ? t.expiry.value : undefined;
  if (expiration === undefined) {
    try {
      const s = JSON.parse(t.signedTx) as Partial<TronSignedTx>;
      if (typeof s.raw_data?.expiration === 'number') expiration = BigInt(s.raw_data.expiration);
    } catch {
      /* the expiration is then unknown */
    }
  }
  // The head first: a transaction absent from the chain after a head at or past its expiration
  // can never be included (a block only takes transactions expiring after its parent's time).
  const head = await nowBlock(ep);
  // Final only once its block is solidified (confirmed by 2/3 of the witnesses): the solidity
  // API answers a receipt only then. Before, a block can still be replaced.
  const solid = await tronCall<TronTxInfo>(ep, '/walletsolidity/gettransactioninfobyid', {
    value: t.txHash,
  });
  if (typeof solid.blockNumber === 'number') {
    const block = BigInt(solid.blockNumber);
    const fee = BigInt(solid.fee ?? 0);
    const receiptResult = solid.receipt?.result;
    if (solid.result === 'FAILED' || (receiptResult !== undefined && receiptResult !== 'SUCCESS')) {
      const data = solid.contractResult?.[0] ?? '';
      const reason =
        receiptResult === 'REVERT' && data
          ? revertReason(data, hexText(solid.resMessage))
          : hexText(solid.resMessage);
      const why = [receiptResult ?? 'FAILED', reason].filter((x) => x).join(': ');
      return { state: 'failed', reason: why, block, fee };
    }
    // A TRC-20 transfer that returns false moved nothing (tokens that answer false instead of reverting).
    const ret = solid.contractResult?.[0] ?? '';
    if (trc20CallOf(t.signedTx) !== undefined && /^[0-9a-fA-F]{64}$/.test(ret) && BigInt(`0x${ret}`) === 0n) {
      return { state: 'failed', reason: 'the token contract returned false: no tokens moved', block, fee };
    }
    return { state: 'confirmed', block, fee };
  }
  const info = await tronCall<TronTxInfo>(ep, '/wallet/gettransactioninfobyid', { value: t.txHash });
  // In a block that is not solidified yet.
  if (typeof info.blockNumber === 'number') return { state: 'pending' };
  if (expiration !== undefined && BigInt(head.timestamp) >= expiration) {
    return {
      state: 'expired',
      reason: `its expiration (${expiration} ms) passed: the head block's time is ${head.timestamp} ms`,
    };
  }
  let inPool = false;
  try {
    const p = await tronCall<{ txID?: string }>(ep, '/wallet/gettransactionfrompending', { value: t.txHash });
    inPool = typeof p.txID === 'string';
  } catch {
    // A node without the pending-pool API: the watcher sends the bytes again (DUP: already known).
  }
  return inPool ? { state: 'pending' } : { state: 'unknown' };
}

/** Tron transfers: TRX and TRC-20 (`token_mint`), built offline on the node's head block, signed offline. */
export const tronTransfers: TransferOps<TronUnsigned> = {
  parse,
  prepare,
  sign,
  broadcast,
  status,
};

/** The base58 form of a hex address (re-exported for tests). */
export { tronBase58 };
