import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { postPinned } from '../src/delivery/sender.js';

interface Received {
  method: string | undefined;
  url: string | undefined;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

interface TestServer {
  port: number;
  received: Received[];
  close: () => Promise<void>;
}

type Answer = (req: http.IncomingMessage, res: http.ServerResponse) => void;

async function listen(server: http.Server | https.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

async function shut(server: http.Server | https.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** A loopback HTTP server that records every request (body included) before `answer` replies. */
async function startServer(answer: Answer): Promise<TestServer> {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks) });
      answer(req, res);
    });
  });
  const port = await listen(server);
  return { port, received, close: () => shut(server) };
}

const status =
  (code: number, headers: http.OutgoingHttpHeaders = {}): Answer =>
  (_req, res) =>
    res.writeHead(code, headers).end('{"ignored":true}');

function local(url: string) {
  return { url: new URL(url), address: '127.0.0.1', family: 4 as const };
}

const servers: TestServer[] = [];
async function server(answer: Answer): Promise<TestServer> {
  const s = await startServer(answer);
  servers.push(s);
  return s;
}

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

describe('postPinned', () => {
  it('reports a 2xx as ok', async () => {
    const s = await server(status(204));
    const result = await postPinned(local(`http://127.0.0.1:${s.port}/hook`), '{}', {}, 5000);
    expect(result).toMatchObject({ ok: true, statusCode: 204, error: null });
    expect(result.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('reports a 500 as not ok, with its status', async () => {
    const s = await server(status(500));
    const result = await postPinned(local(`http://127.0.0.1:${s.port}/`), '{}', {}, 5000);
    expect(result).toMatchObject({ ok: false, statusCode: 500, error: null });
  });

  it('does not follow a redirect', async () => {
    const target = await server(status(200));
    const s = await server(status(302, { location: `http://127.0.0.1:${target.port}/elsewhere` }));
    const result = await postPinned(local(`http://127.0.0.1:${s.port}/`), '{}', {}, 5000);
    expect(result).toMatchObject({ ok: false, statusCode: 302, error: null });
    expect(s.received).toHaveLength(1);
    expect(target.received).toHaveLength(0);
  });

  it('sends the body byte for byte, with its headers', async () => {
    const s = await server(status(200));
    const body = '{"event":"secret.rotated","name":"ключ 🔑","n":1e3,"s":"a\\u0000b"}';
    const result = await postPinned(
      local(`http://127.0.0.1:${s.port}/in?x=1`),
      body,
      { 'X-Custos-Signature': 'v1=abc', 'x-custos-event-id': 'evt_1' },
      5000,
    );
    expect(result.ok).toBe(true);
    const [req] = s.received;
    expect(req!.method).toBe('POST');
    expect(req!.url).toBe('/in?x=1');
    expect(req!.body.equals(Buffer.from(body, 'utf8'))).toBe(true);
    expect(req!.headers).toMatchObject({
      'content-type': 'application/json',
      'user-agent': 'Custos-Webhooks/1',
      'content-length': String(Buffer.byteLength(body)),
      'x-custos-signature': 'v1=abc',
      'x-custos-event-id': 'evt_1',
      host: `127.0.0.1:${s.port}`,
    });
  });

  it('connects to the pinned address, not to what the host name resolves to', async () => {
    const s = await server(status(200));
    const dest = local(`http://pinned.example.test:${s.port}/hook`);
    const result = await postPinned(dest, '{}', {}, 5000);
    expect(result).toMatchObject({ ok: true, statusCode: 200 });
    expect(s.received[0]!.headers.host).toBe(`pinned.example.test:${s.port}`);
  });

  it('gives up after the timeout when the server never answers', async () => {
    const s = await server(() => undefined);
    const started = Date.now();
    const result = await postPinned(local(`http://127.0.0.1:${s.port}/`), '{}', {}, 300);
    expect(result).toEqual({
      ok: false,
      statusCode: null,
      durationMs: expect.any(Number),
      error: 'timeout after 300 ms',
    });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('reports a refused connection', async () => {
    const s = await startServer(status(200));
    const port = s.port;
    await s.close();
    const result = await postPinned(local(`http://127.0.0.1:${port}/`), '{}', {}, 5000);
    expect(result).toMatchObject({ ok: false, statusCode: null, error: 'connect ECONNREFUSED' });
  });

  it('reads at most 64 KiB of an endless response body', async () => {
    const s = await server((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const chunk = Buffer.alloc(16 * 1024, 'x');
      const pump = (): void => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
    const result = await postPinned(local(`http://127.0.0.1:${s.port}/`), '{}', {}, 5000);
    expect(result).toMatchObject({ ok: true, statusCode: 200, error: null });
  });

  it('does not put the body or headers in an error', async () => {
    const result = await postPinned(
      local('http://127.0.0.1:1/'),
      '{"secret":"s3cr3t"}',
      { 'x-custos-signature': 'sig-s3cr3t' },
      5000,
    );
    expect(result.ok).toBe(false);
    expect(result.error).not.toContain('s3cr3t');
  });
});

const hasOpenssl = spawnSync('openssl', ['version']).status === 0;

(hasOpenssl ? describe : describe.skip)('postPinned over https', () => {
  let dir: string;
  let server: https.Server;
  let port: number;
  const serverNames: (string | undefined)[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'custos-sender-'));
    const key = path.join(dir, 'key.pem');
    const cert = path.join(dir, 'cert.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=pinned.example.test',
        '-keyout',
        key,
        '-out',
        cert,
      ],
      { stdio: 'ignore' },
    );
    server = https.createServer(
      {
        key: readFileSync(key),
        cert: readFileSync(cert),
        SNICallback: (name, cb) => {
          serverNames.push(name);
          cb(null);
        },
      },
      (_req, res) => res.writeHead(200).end(),
    );
    port = await listen(server);
  });

  afterAll(async () => {
    await shut(server);
    rmSync(dir, { recursive: true, force: true });
  });

  it('sends the host name as SNI and refuses a certificate it cannot verify', async () => {
    const dest = local(`https://pinned.example.test:${port}/hook`);
    const result = await postPinned(dest, '{}', {}, 5000);
    expect(result).toMatchObject({ ok: false, statusCode: null });
    expect(result.error).toMatch(/SELF_SIGNED|CERT/);
    expect(serverNames).toContain('pinned.example.test');
  });
});
