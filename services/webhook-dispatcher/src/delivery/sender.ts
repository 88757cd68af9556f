import http from 'node:http';
import https from 'node:https';
import net, { type LookupFunction } from 'node:net';

/** How one delivery attempt ended. */
export interface SendResult {
  /** True only for a 2xx answer. */
  ok: boolean;
  /** The answer's status; null when none arrived. */
  statusCode: number | null;
  durationMs: number;
  /** Why no answer arrived (timeout, connect or TLS failure); null once a status arrived. */
  error: string | null;
}

/** The most of a response body read before the connection is dropped. */
export const MAX_RESPONSE_BYTES = 64 * 1024;
const USER_AGENT = 'Custos-Webhooks/1';

/** A short description of a transport error: its syscall and code, never its message. */
function describeError(err: unknown): string {
  const { code, syscall } = (err ?? {}) as { code?: unknown; syscall?: unknown };
  if (typeof code !== 'string') return 'request failed';
  return typeof syscall === 'string' ? `${syscall} ${code}` : code;
}

function requestHeaders(url: URL, body: Buffer, headers: Record<string, string>): Record<string, string> {
  // Lower-cased keys, so a caller's `content-type` replaces ours instead of being sent twice.
  const out: Record<string, string> = { 'content-type': 'application/json', 'user-agent': USER_AGENT };
  for (const [name, value] of Object.entries(headers)) out[name.toLowerCase()] = value;
  out['host'] = url.host;
  out['content-length'] = String(body.length);
  return out;
}

/**
 * POSTs `body` (a string, sent byte-for-byte) to dest.url, connecting ONLY to dest.address (use the
 * `lookup` option of http/https.request returning the pinned address/family so TLS SNI and
 * certificate checks still use the host name; for IP-literal URLs connect directly). Never follows
 * redirects (a 3xx is ok:false with its status). ok is true only for 2xx. The whole exchange is
 * bounded by timeoutMs (connect + response); the response body is drained and discarded, reading at
 * most 64 KiB. Errors (timeout, ECONNREFUSED, TLS) come back as ok:false, statusCode null, a short
 * error string such as "timeout after 10000 ms" or "connect ECONNREFUSED" — never throw, never
 * include the body or headers in the error. Sets Content-Type: application/json, User-Agent:
 * Custos-Webhooks/1, Content-Length, plus the caller's headers. No keep-alive agent (agent: false)
 * so a pinned connection is never reused for another host.
 */
export async function postPinned(
  dest: { url: URL; address: string; family: 4 | 6 },
  body: string,
  headers: Record<string, string>,
  timeoutMs: number,
): Promise<SendResult> {
  const started = performance.now();
  const { url, address, family } = dest;
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const isLiteral = net.isIP(hostname) !== 0;
  const isHttps = url.protocol === 'https:';
  const payload = Buffer.from(body, 'utf8');
  // Net calls this instead of DNS, so the address checked by resolveDestination is the one used.
  const lookup: LookupFunction = (_host, options, callback) => {
    if (options.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  };

  return new Promise<SendResult>((resolve) => {
    let statusCode: number | null = null;
    let request: http.ClientRequest | undefined;
    let settled = false;
    // A status, once it arrived, decides the result; a failure while draining the body does not.
    const finish = (error: string | null): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request?.destroy();
      resolve({
        ok: statusCode !== null && statusCode >= 200 && statusCode < 300,
        statusCode,
        durationMs: Math.round(performance.now() - started),
        error: statusCode === null ? (error ?? 'connection closed without a response') : null,
      });
    };
    const timer = setTimeout(() => finish(`timeout after ${timeoutMs} ms`), timeoutMs);

    const options: https.RequestOptions = {
      method: 'POST',
      protocol: url.protocol,
      host: isLiteral ? address : hostname,
      port: url.port || (isHttps ? 443 : 80),
      path: `${url.pathname}${url.search}`,
      headers: requestHeaders(url, payload, headers),
      agent: false,
      family,
      lookup,
      ...(isHttps && !isLiteral ? { servername: hostname } : {}),
    };
    try {
      request = (isHttps ? https : http).request(options);
    } catch (err) {
      finish(`request ${describeError(err)}`);
      return;
    }
    request.on('error', (err) => finish(describeError(err)));
    request.on('close', () => finish(null));
    request.on('response', (response) => {
      statusCode = response.statusCode ?? null;
      let read = 0;
      response.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read >= MAX_RESPONSE_BYTES) finish(null);
      });
      response.on('end', () => finish(null));
      response.on('error', () => finish(null));
    });
    request.end(payload);
  });
}
