import { ChainRpcError, type ChainEndpoint } from '../keys/chain-adapter.js';

/** At most this much of a node's answer is read (a misbehaving endpoint cannot exhaust memory). */
const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

/**
 * 4xx answers that say nothing about the transaction: the install's credentials for the node are
 * wrong or missing (401, 403, 407), the provider's quota or ban (402, 418, 429), the node is busy
 * (425 Blockfrost's full mempool, 408). An operator's problem or a passing one: answered 503, never
 * 422 `chain_rejected` to the agent, and a broadcast answered so is left for the watcher to resend.
 */
const NOT_A_REFUSAL = new Set([401, 402, 403, 407, 408, 418, 425, 429]);

/**
 * The answer's body as text, read incrementally: past MAX_ANSWER_BYTES the read is aborted and the
 * call failed (a misbehaving endpoint cannot exhaust memory within the timeout).
 */
async function readCapped(ep: ChainEndpoint, res: Response): Promise<string> {
  if (!res.body) return '';
  const chunks: Buffer[] = [];
  let size = 0;
  const reader = res.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > MAX_ANSWER_BYTES) {
        await reader.cancel().catch(() => undefined);
        throw new ChainRpcError(
          `the ${ep.chain.name} node's answer is larger than ${MAX_ANSWER_BYTES} bytes`,
        );
      }
      chunks.push(Buffer.from(value));
    }
  } catch (err) {
    if (err instanceof ChainRpcError) throw err;
    const why = (err as { name?: unknown } | null)?.name === 'TimeoutError' ? 'timed out' : 'broke off';
    throw new ChainRpcError(`the ${ep.chain.name} node's answer ${why}`);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * `text` with the parts of the endpoint's URL that may be a provider's key replaced by `…`: its
 * credentials, path segments of 12 characters or more and query values of 8 or more (as written
 * and percent-decoded). Short segments (`/api`, `/v2`) stay: they are routes, not keys.
 */
export function redactEndpoint(ep: ChainEndpoint, text: string): string {
  let u: URL;
  try {
    u = new URL(ep.url);
  } catch {
    return text;
  }
  const secrets = new Set<string>();
  const add = (v: string, min: number) => {
    if (v.length < min) return;
    secrets.add(v);
    try {
      secrets.add(decodeURIComponent(v));
    } catch {
      // not percent-encoded text: the raw form is enough
    }
  };
  add(u.username, 1);
  add(u.password, 1);
  for (const seg of u.pathname.split('/')) add(seg, 12);
  for (const [, v] of u.searchParams) add(v, 8);
  let out = text;
  for (const secret of [...secrets].sort((a, b) => b.length - a.length)) {
    if (secret) out = out.split(secret).join('…');
  }
  return out;
}

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
    // Never the URL or its path: providers put their API key there (Alchemy, QuickNode …).
    throw new ChainRpcError(`the ${ep.chain.name} node ${why} (${o.method})`);
  }
  const raw = await readCapped(ep, res);
  // A provider's error page may echo its API key (in the URL's path, query or credentials).
  const text = res.status >= 400 ? redactEndpoint(ep, raw) : raw;
  if (NOT_A_REFUSAL.has(res.status) || res.status >= 500) {
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
      `${method}: ${short(redactEndpoint(ep, String(body.error.message)))} (${body.error.code})`,
      body.error.code,
      body.error.data,
    );
  }
  if (!('result' in body)) throw new ChainRpcError(`${method}: the node's answer has no result`);
  return body.result as T;
}
