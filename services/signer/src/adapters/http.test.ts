import { type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ChainRecord } from '../chains/chain-types.js';
import { ChainRpcError, type ChainEndpoint } from '../keys/chain-adapter.js';
import { chainHttp, chainJson } from './http.js';

// The node client every non-EVM adapter uses, against a real HTTP server.

const chain = { name: 'test-chain' } as ChainRecord;
let server: Server;
let base: string;
let handler: (path: string, res: ServerResponse) => void;

beforeAll(async () => {
  server = createServer((req, res) => handler(req.url ?? '', res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v2/SECRET-PROVIDER-KEY-123`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

const ep = (timeoutMs = 2000): ChainEndpoint => ({ chain, url: base, timeoutMs });
const failure = async (p: Promise<unknown>): Promise<ChainRpcError> => {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ChainRpcError);
  return err as ChainRpcError;
};

it('joins the base path, and answers the body of a 2xx', async () => {
  handler = (path, res) => res.end(JSON.stringify({ path }));
  await expect(chainJson(ep(), { method: 'GET', path: 'address/x/utxo' })).resolves.toEqual({
    path: '/v2/SECRET-PROVIDER-KEY-123/address/x/utxo',
  });
});

it('a 4xx about the request is a refusal with its status; quota, ban, busy and credential answers are not', async () => {
  handler = (_p, res) => {
    res.statusCode = 400;
    res.end('sendrawtransaction RPC error: {"code":-26,"message":"dust"}');
  };
  const refused = await failure(chainHttp(ep(), { method: 'POST', path: 'tx', body: '00' }));
  expect(refused).toMatchObject({ rejected: true, status: 400 });
  expect(refused.message).toContain('dust');
  // (407 never reaches us: fetch itself fails a proxy-authentication answer, not a refusal either.)
  for (const status of [401, 402, 403, 408, 418, 425, 429, 500, 503]) {
    handler = (_p, res) => {
      res.statusCode = status;
      res.end('nope');
    };
    const e = await failure(chainHttp(ep(), { method: 'GET', path: 'x' }));
    expect({ status: e.status, rejected: e.rejected }).toEqual({ status, rejected: false });
  }
});

it("never puts the endpoint's path (where providers keep their key) in a failure's message", async () => {
  handler = () => undefined; // never answers
  const slow = await failure(chainHttp(ep(150), { method: 'POST', path: 'tx', body: '00' }));
  expect(slow.message).toMatch(/timed out/);
  expect(slow.rejected).toBe(false);
  const down = await failure(
    chainHttp(
      { chain, url: 'http://127.0.0.1:9/v2/SECRET-PROVIDER-KEY-123', timeoutMs: 1000 },
      { method: 'GET', path: 'x' },
    ),
  );
  expect(down.message).toMatch(/could not be reached/);
  handler = (path, res) => {
    res.statusCode = 404;
    res.end(`Cannot POST ${path}`); // a provider's error page echoing the path
  };
  const echoed = await failure(chainHttp(ep(), { method: 'POST', path: 'tx', body: '00' }));
  expect(echoed.message).toContain('Cannot POST /v2/…/tx');
  // A key in the query string, or echoed alone; a short route segment is left as it is.
  handler = (path, res) => {
    res.statusCode = 401;
    res.end(`invalid api key SECRET-QUERY-KEY-456 for ${path} (see /apidocs)`);
  };
  const q = await failure(
    chainHttp(
      {
        chain,
        url: `${base.replace('/v2/SECRET-PROVIDER-KEY-123', '/api')}?api-key=SECRET-QUERY-KEY-456`,
        timeoutMs: 2000,
      },
      { method: 'GET', path: 'x' },
    ),
  );
  expect(q.message).toContain('invalid api key … for /api/x');
  expect(q.message).toContain('/apidocs');
  for (const e of [slow, down, echoed, q]) {
    expect(e.message).not.toContain('SECRET-PROVIDER-KEY');
    expect(e.message).not.toContain('SECRET-QUERY-KEY');
  }
});

it('aborts an answer larger than 4 MiB as it streams (a failed call, not a refusal)', async () => {
  let written = 0;
  handler = (_p, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    const chunk = Buffer.alloc(256 * 1024, 0x20);
    const pump = () => {
      while (written < 64 * 1024 * 1024) {
        written += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    res.on('close', () => undefined);
    pump();
  };
  const e = await failure(chainHttp(ep(5000), { method: 'GET', path: 'big' }));
  expect(e.message).toMatch(/larger than/);
  expect(e.rejected).toBe(false);
  expect(written).toBeLessThan(64 * 1024 * 1024); // the read stopped early
});

it('sends URL credentials as a header, never in the URL', async () => {
  let seen: string | undefined;
  server.removeAllListeners('request');
  server.on('request', (req, res) => {
    seen = req.headers.authorization;
    res.end('{}');
  });
  const url = base.replace('http://', 'http://user:p%40ss@');
  await chainJson({ chain, url, timeoutMs: 2000 }, { method: 'GET', path: 'x' });
  expect(seen).toBe(`Basic ${Buffer.from('user:p@ss').toString('base64')}`);
});
