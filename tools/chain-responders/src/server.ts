import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A request as a responder's handler sees it. */
export interface ResponderRequest {
  method: string;
  /** The path without the mount prefix, e.g. `/address/bcrt1…/utxo`. */
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  /** The raw body text ('' when none). */
  body: string;
  /** The raw body bytes (binary bodies such as Cardano's CBOR). */
  rawBody: Buffer;
}

/** A handler's answer: a status and a JSON value (or raw text with `text`). */
export interface ResponderAnswer {
  status: number;
  /** JSON to answer (bigints are written as decimal strings). */
  json?: unknown;
  text?: string;
  /** Drop the connection without an answer (a node that went away mid-request). */
  drop?: boolean;
}

/** A running responder. */
export interface RunningResponder {
  /** The base URL to give signer as the chain's `rpc_url` (with the mount prefix). */
  url: string;
  port: number;
  close(): Promise<void>;
}

/**
 * Serves `handle` on 127.0.0.1 (a free port unless given) under `prefix` (e.g. `/api` for Esplora,
 * `/api/v0` for Blockfrost). A handler that throws answers 500 with its message.
 */
export async function serve(
  handle: (req: ResponderRequest) => ResponderAnswer | Promise<ResponderAnswer>,
  o: { prefix?: string; port?: number } = {},
): Promise<RunningResponder> {
  const prefix = (o.prefix ?? '').replace(/\/+$/, '');
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const u = new URL(req.url ?? '/', 'http://localhost');
        let path = u.pathname;
        if (prefix && path.startsWith(prefix)) path = path.slice(prefix.length) || '/';
        let a: ResponderAnswer;
        try {
          a = await handle({
            method: req.method ?? 'GET',
            path,
            query: u.searchParams,
            headers: req.headers,
            body: Buffer.concat(chunks).toString('utf8'),
            rawBody: Buffer.concat(chunks),
          });
        } catch (err) {
          a = { status: 500, text: err instanceof Error ? err.message : String(err) };
        }
        if (a.drop) {
          res.destroy();
          return;
        }
        if (a.text !== undefined) {
          res.writeHead(a.status, { 'content-type': 'text/plain' });
          res.end(a.text);
        } else {
          res.writeHead(a.status, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify(a.json ?? null, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)),
          );
        }
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(o.port ?? 0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}${prefix}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
