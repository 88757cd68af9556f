import { createHash } from 'node:crypto';
import type { SubmitTransactionRequest, Transaction } from '@custos/proto/custos/signer/v1/transactions';
import { InvalidArgumentError, canonicalJson } from '@custos/service-kit';
import type { ChainRecord } from '../chains/chain-types.js';
import type { TransferInput } from '../keys/chain-adapter.js';
import {
  type EvmTxRequest,
  parseEvmAddress,
  parseEvmData,
  parseEvmValue,
  parseGasLimit,
  parseWei,
} from '../evm/index.js';
import type { TxRecord } from './tx-types.js';

/**
 * The Idempotency-Key body hash: SHA-256 (hex) of the canonical JSON of the request body as the
 * gateway received it, or of the request's fields when no body text came.
 */
export function requestHash(req: SubmitTransactionRequest): string {
  const text =
    req.canonicalBody ||
    canonicalJson({
      chain: req.chain,
      chain_id: req.chainId,
      to: req.to,
      value: req.value,
      data: req.data,
      gas_limit: req.gasLimit,
      max_fee_per_gas: req.maxFeePerGas,
      max_priority_fee_per_gas: req.maxPriorityFeePerGas,
      gas_price: req.gasPrice,
      tx_type: req.txType,
      simulate_first: req.simulateFirst,
      resume_tx_id: req.resumeTxId,
      destination_tag: req.destinationTag,
      memo: req.memo,
      fee_rate_sat_per_vbyte: req.feeRateSatPerVbyte,
      fee_limit_sun: req.feeLimitSun,
      token_mint: req.tokenMint,
      token_decimals: req.tokenDecimals,
      ttl: req.ttl,
      unsupported: req.unsupportedFields,
    });
  return createHash('sha256').update(text).digest('hex');
}

/** An Idempotency-Key header: 1..255 visible ASCII characters (400 naming it otherwise). */
export function checkIdempotencyKey(key: string): string {
  if (!/^[\x21-\x7e]{1,255}$/.test(key)) {
    throw new InvalidArgumentError('Idempotency-Key', 'must be 1 to 255 visible ASCII characters');
  }
  return key;
}

/** Which chain the request names: `chain` (name, id or UUID) or `chain_id`; both must agree. */
export function chainRefOf(req: SubmitTransactionRequest): string {
  if (req.chain) return req.chain;
  if (req.chainId !== undefined) return req.chainId;
  throw new InvalidArgumentError('chain', 'is required (a chain name or numeric id; or chain_id)');
}

/** 400 naming `chain` when both `chain` and `chain_id` are given and name different chains. */
export function checkChainAgrees(req: SubmitTransactionRequest, chain: ChainRecord): void {
  if (req.chain && req.chainId !== undefined && BigInt(req.chainId) !== chain.chainId) {
    throw new InvalidArgumentError(
      'chain',
      `names chain_id ${chain.chainId}, but chain_id is ${req.chainId}`,
    );
  }
}

/** Refuses body fields this path does not honour, naming the first. */
export function refuseUnsupported(req: SubmitTransactionRequest, chain: ChainRecord): void {
  const [first] = req.unsupportedFields;
  if (first === undefined) return;
  if (first === 'nonce') {
    throw new InvalidArgumentError(
      'nonce',
      'is allocated by the service (per key and chain, reconciled with the chain); do not send it',
    );
  }
  throw new InvalidArgumentError(first, `is not supported for ${chain.family} chains on this path`);
}

/** The request's EVM fields, parsed (400 naming the field at fault). */
export function evmRequestOf(req: SubmitTransactionRequest, chain: ChainRecord, from: string): EvmTxRequest {
  if (!req.to) throw new InvalidArgumentError('to', 'is required');
  const to = parseEvmAddress(req.to, 'to');
  if (req.value === '') throw new InvalidArgumentError('value', 'is required');
  const value = parseEvmValue(req.value, chain.nativeDecimals, 'value');
  const data = parseEvmData(req.data, 'data');
  const txType = req.txType ?? 2;
  if (txType !== 0 && txType !== 2) {
    throw new InvalidArgumentError('tx_type', 'must be 2 (EIP-1559, default) or 0 (legacy)');
  }
  const r: EvmTxRequest = { chainId: chain.chainId, from, to, value, data, type: txType };
  if (req.gasLimit !== undefined) r.gasLimit = parseGasLimit(req.gasLimit, 'gas_limit');
  if (req.maxFeePerGas !== undefined) r.maxFeePerGas = parseWei(req.maxFeePerGas, 'max_fee_per_gas');
  if (req.maxPriorityFeePerGas !== undefined) {
    r.maxPriorityFeePerGas = parseWei(req.maxPriorityFeePerGas, 'max_priority_fee_per_gas');
  }
  if (req.gasPrice !== undefined) r.gasPrice = parseWei(req.gasPrice, 'gas_price');
  return r;
}

const iso = (d: Date | null) => (d ? d.toISOString() : '');

/** A stored transaction as the wire carries it; `signed_tx` only when asked for. */
export function transactionMessage(t: TxRecord, includeSignedTx: boolean): Transaction {
  return {
    approvalId: t.approvalId ?? '',
    id: t.id,
    agentId: t.agentId,
    keyId: t.keyId,
    chain: t.chainName,
    chainId: t.chainId.toString(),
    from: t.fromAddress,
    to: t.toAddress ?? '',
    valueWei: t.valueWei,
    data: t.data,
    nonce: t.nonce !== null ? String(t.nonce) : '0',
    hasNonce: t.nonce !== null,
    gasLimit: t.gasLimit ?? '',
    txType: t.txType,
    maxFeePerGas: t.maxFeePerGas ?? '',
    maxPriorityFeePerGas: t.maxPriorityFeePerGas ?? '',
    gasPrice: t.gasPrice ?? '',
    status: t.status,
    txHash: t.txHash ?? '',
    signedTx: includeSignedTx ? (t.signedTx ?? '') : '',
    errorMessage: t.errorMessage ?? '',
    blockNumber: t.blockNumber !== null ? t.blockNumber.toString() : '0',
    hasBlockNumber: t.blockNumber !== null,
    gasUsed: t.gasUsed ?? '',
    createdAt: iso(t.createdAt),
    signedAt: iso(t.signedAt),
    broadcastAt: iso(t.broadcastAt),
    confirmedAt: iso(t.confirmedAt),
    family: t.family,
    fee: t.fee ?? '',
    details: { ...t.details },
  };
}

/** The request's non-EVM transfer fields (TransferInput), as given. */
export function transferInputOf(req: {
  to?: string | undefined;
  value?: string | undefined;
  data?: string | undefined;
  memo?: string | undefined;
  destinationTag?: string | number | undefined;
  feeRateSatPerVbyte?: string | number | undefined;
  feeLimitSun?: string | number | undefined;
  tokenMint?: string | undefined;
  tokenDecimals?: number | undefined;
  ttl?: string | number | undefined;
}): TransferInput {
  const num = (v: string | number | undefined, field: string): number | undefined => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isSafeInteger(n)) throw new InvalidArgumentError(field, 'must be a safe integer');
    return n;
  };
  const out: TransferInput = { to: req.to ?? '', value: req.value ?? '' };
  if (req.data !== undefined && req.data !== '' && req.data !== '0x') out.data = req.data;
  if (req.memo !== undefined) out.memo = req.memo;
  const tag = num(req.destinationTag, 'destination_tag');
  if (tag !== undefined) out.destinationTag = tag;
  const rate = num(req.feeRateSatPerVbyte, 'fee_rate_sat_per_vbyte');
  if (rate !== undefined) out.feeRateSatPerVbyte = rate;
  const limit = num(req.feeLimitSun, 'fee_limit_sun');
  if (limit !== undefined) out.feeLimitSun = limit;
  // An empty token_mint is no token (as the adapters read it): never stored as one.
  if (req.tokenMint !== undefined && req.tokenMint !== '') out.tokenMint = req.tokenMint;
  if (req.tokenDecimals !== undefined) out.tokenDecimals = req.tokenDecimals;
  const ttl = num(req.ttl, 'ttl');
  if (ttl !== undefined) out.ttl = ttl;
  return out;
}

/** The non-EVM request fields an EVM chain refuses (400 naming the first present). */
export function refuseTransferFieldsOnEvm(req: SubmitTransactionRequest | TransferFieldsPresent): void {
  const fields: [keyof TransferFieldsPresent, string][] = [
    ['destinationTag', 'destination_tag'],
    ['memo', 'memo'],
    ['feeRateSatPerVbyte', 'fee_rate_sat_per_vbyte'],
    ['feeLimitSun', 'fee_limit_sun'],
    ['tokenMint', 'token_mint'],
    ['tokenDecimals', 'token_decimals'],
    ['ttl', 'ttl'],
  ];
  for (const [k, name] of fields) {
    if ((req as TransferFieldsPresent)[k] !== undefined) {
      throw new InvalidArgumentError(name, 'is not supported on EVM chains');
    }
  }
}

/** EVM's fields on another family's chain: 400 naming the first present. */
export function refuseEvmFields(
  req: {
    gasLimit?: unknown;
    maxFeePerGas?: unknown;
    maxPriorityFeePerGas?: unknown;
    gasPrice?: unknown;
    txType?: unknown;
    nonce?: unknown;
    simulateFirst?: boolean;
  },
  family: string,
): void {
  const present: [unknown, string][] = [
    [req.txType, 'tx_type'],
    [req.nonce, 'nonce'],
    [req.gasLimit, 'gas_limit'],
    [req.gasPrice, 'gas_price'],
    [req.maxFeePerGas, 'max_fee_per_gas'],
    [req.maxPriorityFeePerGas, 'max_priority_fee_per_gas'],
  ];
  for (const [v, name] of present) {
    if (v !== undefined)
      throw new InvalidArgumentError(name, `is an EVM field; ${family} chains do not take it`);
  }
  if (req.simulateFirst) {
    throw new InvalidArgumentError('simulate_first', `is not supported on ${family} chains yet`);
  }
}

/** The non-EVM fields as the proto messages carry them (absent: undefined). */
export interface TransferFieldsPresent {
  destinationTag?: unknown;
  memo?: unknown;
  feeRateSatPerVbyte?: unknown;
  feeLimitSun?: unknown;
  tokenMint?: unknown;
  tokenDecimals?: unknown;
  ttl?: unknown;
}

/** The transfer's details as stored and shown: the request's chain fields and the adapter's facts. */
export function transferDetails(
  input: TransferInput,
  facts: Record<string, string | number | boolean>,
): Record<string, string> {
  const d: Record<string, string> = {};
  if (input.memo !== undefined) d['memo'] = input.memo;
  if (input.destinationTag !== undefined) d['destination_tag'] = String(input.destinationTag);
  if (input.feeRateSatPerVbyte !== undefined) d['fee_rate_sat_per_vbyte'] = String(input.feeRateSatPerVbyte);
  if (input.feeLimitSun !== undefined) d['fee_limit_sun'] = String(input.feeLimitSun);
  if (input.tokenMint !== undefined) d['token_mint'] = input.tokenMint;
  if (input.tokenDecimals !== undefined) d['token_decimals'] = String(input.tokenDecimals);
  if (input.ttl !== undefined) d['ttl'] = String(input.ttl);
  for (const [k, v] of Object.entries(facts)) d[k] = String(v);
  return d;
}

/** A list cursor: the last row's id, opaque to callers (the next page starts after that row). */
export function encodeCursor(t: { id: string }): string {
  return Buffer.from(`tx:${t.id}`).toString('base64url');
}

/** Reads a cursor (400 naming `cursor` when it is not one of ours). */
export function decodeCursor(cursor: string): string {
  const text = Buffer.from(cursor, 'base64url').toString();
  const m = /^tx:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/.exec(text);
  if (!m) throw new InvalidArgumentError('cursor', 'is not a cursor of this list');
  return m[1]!;
}
