import { type SigningKey, Transaction, getAddress } from 'ethers';

/** The local chain of the mesh (`launchMesh({ anvil: true })`): signer registers it as `anvil`. */
export const BENCH_CHAIN = { name: 'anvil', chainId: 31337 } as const;

/**
 * The EIP-1559 transfer every `sign-intent` request and the signing ceilings sign: 10^12 wei
 * (0.000001 ETH) to one address, 21,000 gas, a 2 gwei fee cap with a 1 gwei tip; only the nonce
 * changes from one to the next. Every field is given, so signer has nothing to ask the chain.
 */
export const TRANSFER = {
  valueWei: 1_000_000_000_000n,
  gasLimit: 21_000,
  maxFeePerGas: 2_000_000_000n,
  maxPriorityFeePerGas: 1_000_000_000n,
} as const;

/** The body of `POST /v1/agents/{id}/sign` for the transfer with `nonce`: sign only, nothing to fill. */
export function signIntentBody(to: string, nonce: number): Record<string, unknown> {
  return {
    intent_type: 'transaction',
    chain: BENCH_CHAIN.name,
    tx_type: 2,
    to,
    value: TRANSFER.valueWei.toString(),
    nonce,
    gas_limit: TRANSFER.gasLimit,
    max_fee_per_gas: TRANSFER.maxFeePerGas.toString(),
    max_priority_fee_per_gas: TRANSFER.maxPriorityFeePerGas.toString(),
  };
}

/**
 * The body of `POST /v1/agents/{id}/transactions`: a value transfer of `valueWei` on the bench
 * chain; nonce, gas and fees are left to signer (its nonce allocation, the chain's estimate and
 * fee history), as an agent sending value would leave them.
 */
export function transferBody(to: string, valueWei: bigint): Record<string, unknown> {
  return { chain: BENCH_CHAIN.name, to, value: valueWei.toString() };
}

/** The transaction of `signIntentBody(to, nonce)`, as ethers builds it. */
export function transferTransaction(to: string, nonce: number, chainId: number = BENCH_CHAIN.chainId) {
  return Transaction.from({
    type: 2,
    chainId: BigInt(chainId),
    to,
    value: TRANSFER.valueWei,
    data: '0x',
    nonce,
    gasLimit: BigInt(TRANSFER.gasLimit),
    maxFeePerGas: TRANSFER.maxFeePerGas,
    maxPriorityFeePerGas: TRANSFER.maxPriorityFeePerGas,
  });
}

/**
 * The bare work of one signed intent, as ethers 6 does it: build the transaction, sign its hash
 * with the key, serialize it and hash the result (the `signed_tx` and `tx_hash` an answer carries).
 * The sender is the key's own address and is not recovered from the signature.
 */
export function signTransfer(
  key: SigningKey,
  to: string,
  nonce: number,
): { signedTx: string; txHash: string } {
  const tx = transferTransaction(to, nonce);
  tx.signature = key.sign(tx.unsignedHash);
  return { signedTx: tx.serialized, txHash: tx.hash! };
}

/**
 * What is wrong with a signed transaction an answer returned, against what was asked: each
 * mismatch in words (empty when it is the transfer with `nonce` to `to`, signed by `from`, on
 * the bench chain). Recovers the sender from the signature.
 */
export function signedTxMismatches(
  signedTx: string,
  want: { from: string; to: string; nonce: number; txHash?: string },
): string[] {
  let tx: Transaction;
  try {
    tx = Transaction.from(signedTx);
  } catch (err) {
    return [`not a signed transaction: ${(err as Error).message.slice(0, 80)}`];
  }
  const out: string[] = [];
  const eq = (name: string, got: unknown, expected: unknown) => {
    if (got !== expected) out.push(`${name} ${String(got)} ≠ ${String(expected)}`);
  };
  eq('type', tx.type, 2);
  eq('chain id', tx.chainId, BigInt(BENCH_CHAIN.chainId));
  eq('from', tx.from ? getAddress(tx.from) : null, getAddress(want.from));
  eq('to', tx.to ? getAddress(tx.to) : null, getAddress(want.to));
  eq('nonce', tx.nonce, want.nonce);
  eq('value', tx.value, TRANSFER.valueWei);
  eq('gas limit', tx.gasLimit, BigInt(TRANSFER.gasLimit));
  eq('max fee per gas', tx.maxFeePerGas, TRANSFER.maxFeePerGas);
  eq('max priority fee per gas', tx.maxPriorityFeePerGas, TRANSFER.maxPriorityFeePerGas);
  if (want.txHash !== undefined) eq('hash', tx.hash, want.txHash.toLowerCase());
  return out;
}

/** A JSON-RPC 2.0 request body. */
export function rpcBody(method: string, params: unknown[], id = 1): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method, params });
}

/**
 * How many pre-signed transactions each of `accounts` needs for a closed loop of `seconds` at
 * about `ratePerS`, with `margin` to spare (the loop stops early, and says so, if they run out).
 */
export function presignPerAccount(ratePerS: number, seconds: number, accounts: number, margin = 1.5): number {
  if (!(accounts > 0)) throw new RangeError('at least one account');
  const total = Math.max(0, ratePerS) * Math.max(0, seconds) * margin;
  return Math.max(1, Math.ceil(total / accounts));
}

/**
 * The transaction statuses of a `POST /v1/agents/{id}/transactions` answer that count as a sent
 * transfer: the node took it (`broadcast`), or the watcher already saw it mined (`confirmed`).
 * Signer also answers 201 for a transaction whose broadcast failed (`failed`, its nonce given
 * back): that is not a transfer sent, and the benchmark counts it as a failed request.
 */
export const SENT_STATUSES: readonly string[] = ['broadcast', 'confirmed'];

/** A JSON object body, or undefined when it is not one. */
function jsonObject(body: Buffer | string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(body.toString());
    return v !== null && typeof v === 'object' && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The load generator's verdict on the body of a 2xx transaction answer (load.ts `BodyCheck`):
 * true for a transfer sent (status in SENT_STATUSES, with its hash), otherwise the reason, e.g.
 * `status failed`.
 */
export function acceptSentTransfer(body: Buffer | string): true | string {
  const t = jsonObject(body);
  if (!t) return 'not a JSON object';
  const status = t['status'];
  if (typeof status !== 'string') return 'no status';
  if (!SENT_STATUSES.includes(status)) return `status ${status.slice(0, 40)}`;
  if (typeof t['tx_hash'] !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(t['tx_hash'])) return 'no tx_hash';
  return true;
}

/**
 * The load generator's verdict on the body of a 2xx sign-intent answer: true when it carries a
 * signed transaction and its hash, otherwise the reason.
 */
export function acceptSignedIntent(body: Buffer | string): true | string {
  const t = jsonObject(body);
  if (!t) return 'not a JSON object';
  if (typeof t['signed_tx'] !== 'string' || !t['signed_tx'].startsWith('0x')) return 'no signed_tx';
  if (typeof t['tx_hash'] !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(t['tx_hash'])) return 'no tx_hash';
  return true;
}
