import { ChainRpcError, type ChainEndpoint } from '../keys/chain-adapter.js';

/** At most this much of a node's answer is read (a misbehaving endpoint cannot exhaust memory). */
const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

/** The message of a node's error answer, shortened (it goes into logs and error messages). */
function short(text: string): string {
  const t = text.replace(/\s+/g, ' ').trim();
  return t.length > 300 ? `${t.slice(0, 300)}…` : t;
}

/** `base` joined with `path` (`base` may end with a path of its own, e.g. Esplora's `/api`). */
export function joinUrl(base: string, path: string): string {
  const u = new URL(base);
  const p = `${u.pathname.replace(/\/+$/, '')}/${path.replace(/^\/+/, '')}`;
  u.pathname = p;
  return u.toString();
}

/**
 * One HTTP call to a chain's node, with the endpoint's timeout. Network errors, timeouts and 5xx
 * answers are ChainRpcError without `rejected` (the node may have acted); a 4xx answer is
 * `rejected` with the node's words. Returns the body as text (the caller parses).
 */
export async function chainHttp(
  ep: ChainEndpoint,
  o: {
    method: 'GET' | 'POST';
    path: string;
    body?: string | Uint8Array | undefined;
    contentType?: string;
    headers?: Record<string, string>;
  },
): Promise<{ status: number; text: string }> {
  const url = o.path ? joinUrl(ep.url, o.path) : ep.url;
  const u = new URL(url);
  const headers: Record<string, string> = { accept: 'application/json', ...(o.headers ?? {}) };
  // Credentials in the URL (Blockfrost's project id): a header, never part of logs.
  if (u.username || u.password) {
    headers.authorization = `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64')}`;
    u.username = '';
    u.password = '';
  }
  if (o.body !== undefined) headers['content-type'] = o.contentType ?? 'application/json';
  let res: Response;
  try {
    res = await fetch(u, {
      method: o.method,
      headers,
      body: o.body,
      signal: AbortSignal.timeout(ep.timeoutMs),
      redirect: 'error',
    });
  } catch (err) {
    // A DOMException (not always an Error in every realm) named TimeoutError: the timeout fired.
    const why =
      (err as { name?: unknown } | null)?.name === 'TimeoutError' ? 'timed out' : 'could not be reached';
    throw new ChainRpcError(`the ${ep.chain.name} node ${why} (${o.method} ${u.pathname})`);
  }
  const buf = Buffer.from(await res.arrayBuffer().catch(() => new ArrayBuffer(0)));
  const text = buf.subarray(0, MAX_ANSWER_BYTES).toString('utf8');
  // 401/403/407: the install's credentials for the node (a provider key) are wrong or missing: an
  // operator's problem, not a refusal of the transaction (503, never 422 to the agent).
  if (
    res.status >= 500 ||
    res.status === 429 ||
    res.status === 401 ||
    res.status === 403 ||
    res.status === 407
  ) {
    throw new ChainRpcError(`the ${ep.chain.name} node answered ${res.status}: ${short(text)}`, {
      status: res.status,
    });
  }
  if (res.status >= 400) {
    throw new ChainRpcError(`the ${ep.chain.name} node refused (${res.status}): ${short(text)}`, {
      rejected: true,
      status: res.status,
    });
  }
  return { status: res.status, text };
}

/** `chainHttp` whose answer is JSON (a non-JSON answer is a failed call, not a refusal). */
export async function chainJson<T = unknown>(
  ep: ChainEndpoint,
  o: Parameters<typeof chainHttp>[1],
): Promise<T> {
  const { text } = await chainHttp(ep, o);
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new ChainRpcError(`the ${ep.chain.name} node answered something that is not JSON`);
  }
}

/** A JSON-RPC 2.0 error object. */
export interface JsonRpcErrorBody {
  code: number;
  message: string;
  data?: unknown;
}

/** Thrown by `jsonRpc` when the node answers a JSON-RPC error: `rejected`, with code and data kept. */
export class JsonRpcError extends ChainRpcError {
  constructor(
    message: string,
    readonly code: number,
    readonly data: unknown,
  ) {
    super(message, { rejected: true });
  }
}

let nextId = 1;

/** One JSON-RPC 2.0 call (Solana). An error answer is JsonRpcError (`rejected`). */
export async function jsonRpc<T = unknown>(ep: ChainEndpoint, method: string, params: unknown[]): Promise<T> {
  const id = nextId++;
  const body = await chainJson<{ result?: T; error?: JsonRpcErrorBody }>(ep, {
    method: 'POST',
    path: '',
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
  });
  if (body.error) {
    throw new JsonRpcError(
      `${method}: ${short(String(body.error.message))} (${body.error.code})`,
      body.error.code,
      body.error.data,
    );
  }
  if (!('result' in body)) throw new ChainRpcError(`${method}: the node's answer has no result`);
  return body.result as T;
}
