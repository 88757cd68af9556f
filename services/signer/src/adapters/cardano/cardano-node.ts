import { ChainRpcError, type ChainEndpoint } from '../../keys/chain-adapter.js';
import { chainHttp, chainJson, joinUrl } from '../http.js';

/**
 * Blockfrost's HTTP API (`rpc_url` = its base, e.g. `https://<project_id>@cardano-mainnet.blockfrost.io/api/v0`):
 * the project id travels in the `project_id` header, never as Basic auth nor in the URL.
 */
export interface Blockfrost {
  endpoint: ChainEndpoint;
  headers: Record<string, string>;
}

/** The endpoint without userinfo, and the `project_id` header the userinfo names. */
export function blockfrostOf(ep: ChainEndpoint): Blockfrost {
  const u = new URL(ep.url);
  const headers: Record<string, string> = {};
  if (u.username) headers.project_id = decodeURIComponent(u.username);
  u.username = '';
  u.password = '';
  return { endpoint: { ...ep, url: u.toString() }, headers };
}

/** Blockfrost's `/epochs/latest/parameters`: the fields a payment needs. */
export interface BlockfrostParameters {
  min_fee_a: number;
  min_fee_b: number;
  max_tx_size: number;
  key_deposit: string;
  pool_deposit: string;
  coins_per_utxo_size: string | null;
  max_val_size: string | null;
  price_mem?: number | null;
  price_step?: number | null;
  min_fee_ref_script_cost_per_byte?: number | null;
}

/** One of Blockfrost's `/addresses/{a}/utxos` rows. */
export interface BlockfrostUtxo {
  tx_hash: string;
  output_index: number;
  amount: { unit: string; quantity: string }[];
  data_hash?: string | null;
  inline_datum?: string | null;
  reference_script_hash?: string | null;
}

/** Blockfrost's `/txs/{hash}` (the fields status reads). */
export interface BlockfrostTx {
  hash: string;
  block_height: number;
  slot: number;
  fees: string;
  valid_contract?: boolean;
}

/** A Blockfrost 404 (`{"status_code":404,…}`): the thing is not (yet) there. */
function isNotFound(e: unknown): boolean {
  return e instanceof ChainRpcError && e.rejected && /\(404\)/.test(e.message);
}

/**
 * GET `path` (with an optional query). `joinUrl` takes a path only (a `?` in it would be escaped),
 * so a query goes on a copy of the endpoint whose URL is the whole request URL, with an empty path.
 */
async function get<T>(bf: Blockfrost, path: string, query?: Record<string, string>): Promise<T> {
  if (!query) return chainJson<T>(bf.endpoint, { method: 'GET', path, headers: bf.headers });
  const u = new URL(joinUrl(bf.endpoint.url, path));
  for (const [k, v] of Object.entries(query)) u.searchParams.set(k, v);
  return chainJson<T>(
    { ...bf.endpoint, url: u.toString() },
    { method: 'GET', path: '', headers: bf.headers },
  );
}

/** GET that answers undefined on 404. */
async function getOrNone<T>(
  bf: Blockfrost,
  path: string,
  query?: Record<string, string>,
): Promise<T | undefined> {
  try {
    return await get<T>(bf, path, query);
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

/** A non-refusal error for an answer that is not what Blockfrost gives. */
function malformed(bf: Blockfrost, what: string): ChainRpcError {
  return new ChainRpcError(`the ${bf.endpoint.chain.name} node's ${what} answer is malformed`);
}

export async function latestParameters(bf: Blockfrost): Promise<BlockfrostParameters> {
  const p = await get<BlockfrostParameters>(bf, '/epochs/latest/parameters');
  if (
    typeof p?.min_fee_a !== 'number' ||
    typeof p.min_fee_b !== 'number' ||
    typeof p.max_tx_size !== 'number'
  ) {
    throw malformed(bf, 'protocol parameters');
  }
  return p;
}

/** The tip's slot and height. */
export async function latestBlock(bf: Blockfrost): Promise<{ slot: number; height: number }> {
  const b = await get<{ slot?: unknown; height?: unknown }>(bf, '/blocks/latest');
  if (typeof b?.slot !== 'number' || typeof b.height !== 'number') throw malformed(bf, 'latest block');
  return { slot: b.slot, height: b.height };
}

/** Every UTxO of an address (pages of 100; a 404 is an address the chain never saw: none). */
export async function addressUtxos(bf: Blockfrost, address: string): Promise<BlockfrostUtxo[]> {
  const all: BlockfrostUtxo[] = [];
  for (let page = 1; page <= 1000; page++) {
    const rows = await getOrNone<BlockfrostUtxo[]>(bf, `/addresses/${encodeURIComponent(address)}/utxos`, {
      count: '100',
      page: String(page),
    });
    if (rows === undefined) return all;
    if (!Array.isArray(rows)) throw malformed(bf, 'UTxO');
    all.push(...rows);
    if (rows.length < 100) return all;
  }
  return all;
}

/** The transaction once a block includes it, else undefined. */
export async function txByHash(bf: Blockfrost, hash: string): Promise<BlockfrostTx | undefined> {
  return getOrNone<BlockfrostTx>(bf, `/txs/${hash}`);
}

/** True when Blockfrost's mempool holds the transaction (one submitted through this project). */
export async function inMempool(bf: Blockfrost, hash: string): Promise<boolean> {
  return (await getOrNone<unknown>(bf, `/mempool/${hash}`)) !== undefined;
}

/** Which outputs of a transaction are spent, and by which transaction. */
export async function txOutputs(
  bf: Blockfrost,
  hash: string,
): Promise<{ output_index: number; consumed_by_tx?: string | null }[] | undefined> {
  const r = await getOrNone<{ outputs?: { output_index: number; consumed_by_tx?: string | null }[] }>(
    bf,
    `/txs/${hash}/utxos`,
  );
  return r?.outputs;
}

/** `POST /tx/submit` with the raw CBOR; Blockfrost answers the transaction id as a JSON string. */
export async function submitTx(bf: Blockfrost, cbor: Uint8Array): Promise<string> {
  const { text } = await chainHttp(bf.endpoint, {
    method: 'POST',
    path: '/tx/submit',
    body: cbor,
    contentType: 'application/cbor',
    headers: bf.headers,
  });
  let id: unknown;
  try {
    id = JSON.parse(text);
  } catch {
    throw malformed(bf, 'submit');
  }
  if (typeof id !== 'string') throw malformed(bf, 'submit');
  return id;
}
