import { chainHttp, chainJson } from '../http.js';
import { ChainRpcError, type ChainEndpoint, type TransferStatus } from '../../keys/chain-adapter.js';
import { bitcoin } from './bitcoin-lib.js';

// The node calls of the Bitcoin adapter, against an Esplora HTTP API (electrs as Blockstream and
// mempool.space serve it: the chain's `rpc_url` is the API's base, e.g. `https://…/api`).

/** One UTXO as Esplora's `GET /address/:address/utxo` lists it. */
export interface EsploraUtxo {
  txid: string;
  vout: number;
  value: number;
  status: { confirmed: boolean; block_height?: number; block_hash?: string; block_time?: number };
}

/** True when the node answered 404. */
function isNotFound(err: unknown): boolean {
  return err instanceof ChainRpcError && err.status === 404;
}

/**
 * The address's UTXOs, confirmed and in the mempool (not those spent in the mempool). electrs
 * refuses to list more than its limit (`400 Too many unspent transaction outputs (>500)`): not a
 * refusal of the transfer (the node failed to serve the key; 503, never 422) — keys with that many
 * UTXOs are not supported.
 */
export async function fetchUtxos(ep: ChainEndpoint, address: string): Promise<EsploraUtxo[]> {
  let list: unknown;
  try {
    list = await chainJson<unknown>(ep, { method: 'GET', path: `address/${address}/utxo` });
  } catch (err) {
    if (err instanceof ChainRpcError && err.rejected && /too many/i.test(err.message)) {
      throw new ChainRpcError(
        `the ${ep.chain.name} node will not list the key's UTXOs: it has more than the node's limit ` +
          `(${err.message.replace(/^.*?refused \(\d+\): /, '')}); keys with that many UTXOs are not supported`,
        ...(err.status !== undefined ? [{ status: err.status }] : []),
      );
    }
    throw err;
  }
  if (!Array.isArray(list)) throw new ChainRpcError(`the ${ep.chain.name} node's UTXO list is not a list`);
  return list.map((u: Record<string, unknown>) => {
    const status = (u['status'] ?? {}) as EsploraUtxo['status'];
    if (
      typeof u['txid'] !== 'string' ||
      !/^[0-9a-f]{64}$/.test(u['txid']) ||
      !Number.isSafeInteger(u['vout']) ||
      !Number.isSafeInteger(u['value']) ||
      (u['value'] as number) < 0
    ) {
      throw new ChainRpcError(`the ${ep.chain.name} node's UTXO list has a malformed entry`);
    }
    return { txid: u['txid'], vout: u['vout'] as number, value: u['value'] as number, status };
  });
}

/**
 * The node's fee rate for confirmation within 6 blocks (sat/vB, its fraction kept, at least 1): Esplora's
 * `GET /fee-estimates` target "6", else the nearest longer target it gives, else the nearest shorter.
 */
export async function fetchFeeRate(ep: ChainEndpoint): Promise<number> {
  const map = await chainJson<Record<string, unknown>>(ep, { method: 'GET', path: 'fee-estimates' });
  const entries = Object.entries(map ?? {})
    .map(([k, v]) => [Number(k), Number(v)] as const)
    .filter(([k, v]) => Number.isInteger(k) && k > 0 && Number.isFinite(v) && v > 0);
  const longer = entries.filter(([k]) => k >= 6).sort((a, b) => a[0] - b[0]);
  const shorter = entries.filter(([k]) => k < 6).sort((a, b) => b[0] - a[0]);
  const pick = longer[0] ?? shorter[0];
  if (!pick) return 1; // no estimate (e.g. a fresh regtest node): the minimum relay fee
  // The fraction is kept: the fee is already ceil(vsize × rate).
  return Math.max(1, pick[1]);
}

/** The words bitcoind uses when it already holds the transaction (in a block or the mempool). */
const ALREADY_KNOWN =
  /"code":\s*-27|already in block chain|already in utxo set|txn-already-known|txn-already-in-mempool/i;

/** bitcoind's refusal (`sendrawtransaction RPC error: {"code":…,"message":…}`) in short words. */
function refusalWords(text: string): string {
  const m = /\{.*\}/.exec(text);
  if (m) {
    try {
      const j = JSON.parse(m[0]) as { code?: number; message?: string };
      if (typeof j.message === 'string') return `${j.message} (${j.code ?? '?'})`;
    } catch {
      // not JSON: the text as it is
    }
  }
  return text;
}

/** `POST /tx` (raw hex): the node answers the txid, or 400 with bitcoind's refusal. */
export async function broadcastTx(ep: ChainEndpoint, hex: string, txid: string): Promise<void> {
  let answer: string;
  try {
    answer = (await chainHttp(ep, { method: 'POST', path: 'tx', body: hex, contentType: 'text/plain' })).text;
  } catch (err) {
    if (!(err instanceof ChainRpcError) || !err.rejected) throw err;
    const text = err.message.replace(/^.*?refused \(\d+\): /, '');
    if (ALREADY_KNOWN.test(text)) {
      throw new ChainRpcError(
        `the ${ep.chain.name} node already has the transaction: ${refusalWords(text)}`,
        {
          rejected: true,
          alreadyKnown: true,
        },
      );
    }
    throw new ChainRpcError(`the ${ep.chain.name} node refused the transaction: ${refusalWords(text)}`, {
      rejected: true,
    });
  }
  if (answer.trim() !== txid) {
    throw new ChainRpcError(`the ${ep.chain.name} node answered another txid than the transaction's`);
  }
}

/**
 * Where a broadcast transaction is: confirmed at 1 confirmation (`GET /tx/:txid/status`); pending
 * while the node has it (`GET /tx/:txid/hex`); expired when one of its inputs was spent by another
 * transaction in a block (`GET /tx/:prev/outspend/:vout`, its `status.confirmed`; a rival only in
 * the mempool may still be evicted or replaced, so that is not final); else unknown (signer sends
 * it again).
 */
export async function txStatus(ep: ChainEndpoint, txid: string, signedHex: string): Promise<TransferStatus> {
  let status: { confirmed?: unknown; block_height?: unknown } | undefined;
  try {
    status = await chainJson(ep, { method: 'GET', path: `tx/${txid}/status` });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  if (status?.confirmed === true) {
    const h = status.block_height;
    return typeof h === 'number' && Number.isSafeInteger(h)
      ? { state: 'confirmed', block: BigInt(h) }
      : { state: 'confirmed' };
  }
  // electrs answers `{"confirmed":false}` for a transaction it does not know as well as for one
  // in its mempool: the raw transaction tells them apart (404 "Transaction not found").
  try {
    await chainHttp(ep, { method: 'GET', path: `tx/${txid}/hex` });
    return { state: 'pending' };
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  const tx = bitcoin.Transaction.fromHex(signedHex);
  for (const input of tx.ins) {
    const prev = Buffer.from(input.hash).reverse().toString('hex');
    const spend = await chainJson<{ spent?: unknown; txid?: unknown; status?: { confirmed?: unknown } }>(ep, {
      method: 'GET',
      path: `tx/${prev}/outspend/${input.index}`,
    });
    if (spend?.spent === true && typeof spend.txid === 'string') {
      if (spend.txid === txid) return { state: 'pending' }; // it arrived between the two calls
      if (spend.status?.confirmed === true) {
        return {
          state: 'expired',
          reason: `input ${prev}:${input.index} was spent by ${spend.txid} (confirmed)`,
        };
      }
    }
  }
  return { state: 'unknown' };
}
