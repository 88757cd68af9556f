import { ChainRpcError, type ChainEndpoint } from '../../keys/chain-adapter.js';
import { JsonRpcError, jsonRpc } from '../http.js';

/** Reads are made at this commitment (a supermajority voted for the block). */
export const READ_COMMITMENT = 'confirmed';

/** What `getAccountInfo` says of an account (null: it does not exist). */
export interface SolanaAccount {
  lamports: bigint;
  owner: string;
  data: Buffer;
  executable: boolean;
}

interface RpcAccount {
  lamports: number;
  owner: string;
  data: [string, string] | string;
  executable: boolean;
}

/** A read's JSON-RPC error answer: a failed call (not `rejected`), its code kept. */
export class RpcReadError extends ChainRpcError {
  constructor(
    message: string,
    readonly code: number,
  ) {
    super(message);
  }
}

/**
 * A read (`jsonRpc`) whose JSON-RPC error answer is the node's failure, not a refusal: no
 * transaction was given to it (node unhealthy -32005, behind -32016, rate limits, internal errors).
 */
async function read<T>(ep: ChainEndpoint, method: string, params: unknown[]): Promise<T> {
  try {
    return await jsonRpc<T>(ep, method, params);
  } catch (err) {
    if (err instanceof JsonRpcError)
      throw new RpcReadError(`the ${ep.chain.name} node failed ${err.message}`, err.code);
    throw err;
  }
}

/** `getLatestBlockhash`: the blockhash and the last block height at which it is still accepted. */
export async function latestBlockhash(
  ep: ChainEndpoint,
): Promise<{ blockhash: string; lastValidBlockHeight: bigint }> {
  const r = await read<{ value: { blockhash: string; lastValidBlockHeight: number } }>(
    ep,
    'getLatestBlockhash',
    [{ commitment: READ_COMMITMENT }],
  );
  if (typeof r?.value?.blockhash !== 'string' || !Number.isSafeInteger(r.value.lastValidBlockHeight)) {
    throw new ChainRpcError(`getLatestBlockhash: the ${ep.chain.name} node's answer is not a blockhash`);
  }
  return { blockhash: r.value.blockhash, lastValidBlockHeight: BigInt(r.value.lastValidBlockHeight) };
}

function lamportsOf(ep: ChainEndpoint, method: string, v: unknown): bigint {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) {
    throw new ChainRpcError(`${method}: the ${ep.chain.name} node's answer is not an amount of lamports`);
  }
  return BigInt(v);
}

/** `getBalance` in lamports. */
export async function balanceOf(ep: ChainEndpoint, address: string): Promise<bigint> {
  const r = await read<{ value: number }>(ep, 'getBalance', [address, { commitment: READ_COMMITMENT }]);
  return lamportsOf(ep, 'getBalance', r?.value);
}

/** `getAccountInfo` (base64 data); null when the account does not exist. */
export async function accountInfo(ep: ChainEndpoint, address: string): Promise<SolanaAccount | null> {
  const r = await read<{ value: RpcAccount | null }>(ep, 'getAccountInfo', [
    address,
    { encoding: 'base64', commitment: READ_COMMITMENT },
  ]);
  const v = r?.value;
  if (v === null) return null;
  if (!v || !Array.isArray(v.data) || v.data[1] !== 'base64' || typeof v.owner !== 'string') {
    throw new ChainRpcError(`getAccountInfo: the ${ep.chain.name} node's answer is not an account`);
  }
  return {
    lamports: lamportsOf(ep, 'getAccountInfo', v.lamports),
    owner: v.owner,
    data: Buffer.from(v.data[0], 'base64'),
    executable: v.executable === true,
  };
}

/** `getMinimumBalanceForRentExemption` of an account with `space` bytes of data. */
export async function rentExemptMinimum(ep: ChainEndpoint, space: number): Promise<bigint> {
  const r = await read<number>(ep, 'getMinimumBalanceForRentExemption', [
    space,
    { commitment: READ_COMMITMENT },
  ]);
  return lamportsOf(ep, 'getMinimumBalanceForRentExemption', r);
}

/**
 * The fee of a compiled message (`getFeeForMessage`); `fallback` when the node does not say
 * (null: it no longer knows the blockhash; or a node without the method).
 */
export async function feeForMessage(
  ep: ChainEndpoint,
  messageBase64: string,
  fallback: bigint,
): Promise<bigint> {
  let r: { value: number | null };
  try {
    r = await read<{ value: number | null }>(ep, 'getFeeForMessage', [
      messageBase64,
      { commitment: READ_COMMITMENT },
    ]);
  } catch (err) {
    if (err instanceof RpcReadError && err.code === -32601) return fallback;
    throw err;
  }
  if (r?.value === null || r?.value === undefined) return fallback;
  return lamportsOf(ep, 'getFeeForMessage', r.value);
}

/** A signature's status as `getSignatureStatuses` gives it (null: the node does not know it). */
export interface SignatureStatus {
  slot: number;
  confirmations: number | null;
  err: unknown;
  confirmationStatus?: 'processed' | 'confirmed' | 'finalized' | null;
}

/** `getSignatureStatuses` of one signature, searching the node's history too. */
export async function signatureStatus(ep: ChainEndpoint, signature: string): Promise<SignatureStatus | null> {
  const r = await read<{ value: (SignatureStatus | null)[] }>(ep, 'getSignatureStatuses', [
    [signature],
    { searchTransactionHistory: true },
  ]);
  if (!r || !Array.isArray(r.value) || r.value.length !== 1) {
    throw new ChainRpcError(`getSignatureStatuses: the ${ep.chain.name} node's answer has no status list`);
  }
  return r.value[0] ?? null;
}

/** `getBlockHeight` at `commitment`. */
export async function blockHeight(ep: ChainEndpoint, commitment: 'confirmed' | 'finalized'): Promise<bigint> {
  const r = await read<number>(ep, 'getBlockHeight', [{ commitment }]);
  if (typeof r !== 'number' || !Number.isSafeInteger(r) || r < 0) {
    throw new ChainRpcError(`getBlockHeight: the ${ep.chain.name} node's answer is not a block height`);
  }
  return BigInt(r);
}

/**
 * JSON-RPC error codes of `sendTransaction` that refuse THIS transaction (it is not in the
 * node's hands): preflight simulation failed (-32002, its `data.err` says why), a signature does
 * not verify (-32003), precompile verification (-32006), signature count (-32013), unsupported
 * version (-32015), undecodable or invalid transaction (-32602). Any other code (node unhealthy
 * -32005, internal error -32603, min context slot -32016 …) is the node's trouble: not a refusal.
 */
const REFUSING_CODES = new Set([-32002, -32003, -32006, -32013, -32015, -32602]);

/** `sendTransaction` of a base64 wire transaction (with preflight); the node's signature. */
export async function sendTransaction(ep: ChainEndpoint, wireBase64: string): Promise<string> {
  try {
    return await jsonRpc<string>(ep, 'sendTransaction', [
      wireBase64,
      { encoding: 'base64', preflightCommitment: READ_COMMITMENT },
    ]);
  } catch (err) {
    if (!(err instanceof JsonRpcError)) throw err;
    const txErr = (err.data as { err?: unknown } | null | undefined)?.err;
    const why = txErr === undefined || txErr === null ? '' : ` [${JSON.stringify(txErr).slice(0, 200)}]`;
    if (txErr === 'AlreadyProcessed' || /already been processed/i.test(err.message)) {
      throw new ChainRpcError(`the ${ep.chain.name} node already has this transaction: ${err.message}`, {
        alreadyKnown: true,
      });
    }
    if (REFUSING_CODES.has(err.code)) {
      throw new ChainRpcError(`the ${ep.chain.name} node refused the transaction: ${err.message}${why}`, {
        rejected: true,
      });
    }
    throw new ChainRpcError(`the ${ep.chain.name} node failed: ${err.message}${why}`);
  }
}

/** `getTransaction`'s error when the node keeps no transaction history. */
const HISTORY_UNAVAILABLE = -32011;

/**
 * `getTransaction` at `finalized`: the transaction's slot, execution error and fee when the node
 * has it in a rooted block; `null` when it does not find it; `'no-history'` when the node says it
 * keeps no transaction history (-32011).
 */
export async function finalizedTransaction(
  ep: ChainEndpoint,
  signature: string,
): Promise<{ slot: number; err: unknown; fee: bigint | undefined } | null | 'no-history'> {
  let r: { slot?: number; meta?: { err?: unknown; fee?: number } | null } | null;
  try {
    r = await read<typeof r>(ep, 'getTransaction', [
      signature,
      { commitment: 'finalized', maxSupportedTransactionVersion: 0, encoding: 'base64' },
    ]);
  } catch (err) {
    if (err instanceof RpcReadError && err.code === HISTORY_UNAVAILABLE) return 'no-history';
    throw err;
  }
  if (r === null || r === undefined) return null;
  if (typeof r !== 'object' || !Number.isSafeInteger(r.slot) || !r.meta || typeof r.meta !== 'object') {
    throw new ChainRpcError(`getTransaction: the ${ep.chain.name} node's answer has no slot or meta`);
  }
  const fee = Number.isSafeInteger(r.meta.fee) ? BigInt(r.meta.fee as number) : undefined;
  return { slot: r.slot as number, err: r.meta.err ?? null, fee };
}

/**
 * The block height of the lowest block the node's ledger holds (`minimumLedgerSlot`, then
 * `getBlock` of that slot); undefined when the node cannot say (no history, the block cleaned up
 * or skipped meanwhile).
 */
export async function lowestBlockHeight(ep: ChainEndpoint): Promise<bigint | undefined> {
  let slot: number;
  try {
    slot = await read<number>(ep, 'minimumLedgerSlot', []);
  } catch (err) {
    if (err instanceof RpcReadError) return undefined;
    throw err;
  }
  if (typeof slot !== 'number' || !Number.isSafeInteger(slot) || slot < 0) return undefined;
  try {
    const b = await read<{ blockHeight?: number | null } | null>(ep, 'getBlock', [
      slot,
      {
        commitment: 'finalized',
        transactionDetails: 'none',
        rewards: false,
        maxSupportedTransactionVersion: 0,
      },
    ]);
    const h = b?.blockHeight;
    return typeof h === 'number' && Number.isSafeInteger(h) ? BigInt(h) : undefined;
  } catch (err) {
    if (err instanceof RpcReadError) return undefined;
    throw err;
  }
}
