import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import type { Express } from 'express';
import { execFileSync } from 'node:child_process';
import { IdentityKeys } from '@custos/auth';
import { MeshTls, createLogger, createMetrics } from '@custos/service-kit';
import { writeTestMeshCerts } from '@custos/testing';
import { PEERS } from '../src/config';
import { createApp } from '../src/http/app';
import { openApiPath } from '../src/http/openapi';
import { parseTrustedProxies } from '../src/http/client-ip';
import { connectPeers } from '../src/peers';

// The gateway's own HTTP contract: the OpenAPI document, 405/415, and bodies refused before any RPC.
// No peer is reachable here (every peer address is a closed port), so a request that got past the
// gateway's checks would fail with 503 — a 4xx proves the gateway refused it itself.

interface Layer {
  route?: { path: string | string[]; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
}

/** Every (method, path) the Express app really serves, from its router stack. */
function servedRoutes(app: Express): string[] {
  const out = new Set<string>();
  const walk = (stack: Layer[]) => {
    for (const layer of stack) {
      if (layer.route) {
        const paths = Array.isArray(layer.route.path) ? layer.route.path : [layer.route.path];
        for (const p of paths) {
          for (const [m, on] of Object.entries(layer.route.methods)) {
            if (on && m !== '_all') out.add(`${m.toUpperCase()} ${p}`);
          }
        }
      } else if (layer.handle?.stack) walk(layer.handle.stack);
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack);
  return [...out].sort();
}

/**
 * Validates a document with @seriousme/openapi-schema-validator (the OpenAPI Initiative's 3.1
 * schemas). The package is ESM-only and jest runs CommonJS here, so it runs in a child process.
 */
function validateOpenApi(d: unknown): { valid: boolean; errors?: unknown } {
  const script = `
    import { Validator } from '@seriousme/openapi-schema-validator';
    let input = '';
    for await (const chunk of process.stdin) input += chunk;
    const r = await new Validator().validate(JSON.parse(input));
    process.stdout.write(JSON.stringify({ valid: r.valid, errors: r.errors }));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: __dirname,
    input: JSON.stringify(d),
    encoding: 'utf8',
  });
  return JSON.parse(out) as { valid: boolean; errors?: unknown };
}

describe('gateway HTTP contract', () => {
  let app: Express;
  let base: string;
  let server: http.Server;
  let redis: Redis;
  let close: () => void;

  beforeAll(async () => {
    const logger = createLogger({ service: 'contract-test', level: 'silent' });
    redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
      keyPrefix: `contract-${process.pid}:`,
      maxRetriesPerRequest: 0,
      lazyConnect: true,
    });
    redis.on('error', () => undefined);
    await redis.connect().catch(() => undefined);
    const addrs = Object.fromEntries(PEERS.map((p) => [p.variable, '127.0.0.1:1'])) as Record<
      (typeof PEERS)[number]['variable'],
      string
    >;
    const certDir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-contract-test-'));
    const { files } = await writeTestMeshCerts(certDir, ['gateway']);
    const peers = connectPeers({ ...addrs, GRPC_DEADLINE_MS: 500 }, new MeshTls(files['gateway']!));
    close = () => {
      peers.close();
      fs.rmSync(certDir, { recursive: true, force: true });
    };
    app = createApp({
      logger,
      registry: createMetrics('contract-test').registry,
      redis,
      peers,
      trustedProxies: parseTrustedProxies([]),
      rateLimit: { ratePerSecond: 10_000, burst: 10_000 },
      healthTimeoutMs: 300,
      identityKeys: IdentityKeys.overGrpc(peers.identity, redis, logger, {
        issuers: ['http://127.0.0.1:8080'],
        audience: 'custos-api',
      }),
    });
    server = http.createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
    close();
    redis.disconnect();
  });

  async function doc(): Promise<
    Record<string, unknown> & { paths: Record<string, Record<string, unknown>> }
  > {
    const res = await fetch(`${base}/v1/openapi.json`);
    expect(res.status).toBe(200);
    return (await res.json()) as Record<string, unknown> & { paths: Record<string, Record<string, unknown>> };
  }

  it('serves an OpenAPI 3.1 document that validates', async () => {
    const d = await doc();
    expect(d['openapi']).toBe('3.1.0');
    const result = validateOpenApi(d);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('lists every route the app serves, and nothing it does not', async () => {
    const d = await doc();
    const documented = Object.entries(d.paths)
      .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`))
      .sort();
    const served = servedRoutes(app)
      .filter((r) => r.split(' ')[1]!.startsWith('/v1/') || r.split(' ')[1]!.startsWith('/.well-known/'))
      .map((r) => {
        const [method, path] = r.split(' ');
        return `${method} ${openApiPath(path!).path}`;
      });
    expect(served.length).toBeGreaterThan(50);
    // HEAD handlers are the 405 refusals of GETs that read a value (RouteSpec.noHead), not routes.
    const heads = served.filter((r) => r.startsWith('HEAD '));
    expect(heads.length).toBeGreaterThan(0);
    for (const h of heads) expect(documented).toContain(h.replace(/^HEAD /, 'GET '));
    expect([...new Set(served.filter((r) => !r.startsWith('HEAD ')))].sort()).toEqual(documented);
  });

  it('documents security, a request body where one is read, and problem details for refusals', async () => {
    const d = await doc();
    const vaults = d.paths['/v1/vaults'] as Record<string, Record<string, unknown>>;
    expect(vaults['post']!['security']).toEqual([{ bearer: [] }]);
    expect(vaults['post']!['requestBody']).toBeDefined();
    expect((vaults['post']!['responses'] as Record<string, unknown>)['400']).toEqual({
      $ref: '#/components/responses/Problem',
    });
    expect((d.paths['/v1/health'] as Record<string, Record<string, unknown>>)['get']!['security']).toEqual(
      [],
    );
  });

  it('documents the account_locked refusal of password sign-in as a problem-details 429', async () => {
    const d = await doc();
    const signIn = (d.paths['/v1/auth/token'] as Record<string, Record<string, unknown>>)['post']!;
    const locked = (signIn['responses'] as Record<string, Record<string, unknown>>)['429']!;
    expect(locked['description']).toContain('`account_locked`');
    expect(locked['content']).toEqual({
      'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } },
    });
    // Routes that declare no 429 of their own keep the shared one.
    const refresh = (d.paths['/v1/auth/refresh'] as Record<string, Record<string, unknown>>)['post']!;
    expect((refresh['responses'] as Record<string, unknown>)['429']).toEqual({
      $ref: '#/components/responses/Problem',
    });
  });

  it('answers 405 with Allow for a known path and the wrong method', async () => {
    const res = await fetch(`${base}/v1/health`, { method: 'DELETE' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, HEAD');
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await res.json()).toMatchObject({ status: 405, title: 'Method Not Allowed' });
    const secrets = await fetch(`${base}/v1/vaults/abc/secrets/a/b/c`, { method: 'POST' });
    expect(secrets.status).toBe(405);
    expect(secrets.headers.get('allow')).toBe('DELETE, GET, PUT');
    expect((await fetch(`${base}/v1/no-such-thing`)).status).toBe(404);
  });

  it('answers 415 naming the content type for a body that is not JSON', async () => {
    const res = await fetch(`${base}/v1/auth/signup`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'email=a@example.com',
    });
    expect(res.status).toBe(415);
    expect(await res.json()).toMatchObject({
      status: 415,
      field: 'content-type',
      detail: expect.stringContaining('text/plain'),
    });
    // RFC 8693 clients may post a form to the token exchange.
    const form = await fetch(`${base}/v1/auth/federated-token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=x',
    });
    expect(form.status).not.toBe(415);
  });

  const post = (path: string, raw: string) =>
    fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: raw });

  it('refuses deep nesting, NUL and unpaired surrogates with a 400 naming the field, before any RPC', async () => {
    const deep = `{"email":${'['.repeat(5000)}${']'.repeat(5000)}}`;
    const cases: Array<[string, string]> = [
      [deep, 'email'],
      ['{"email":"a\\u0000@example.com","password":"x"}', 'email'],
      ['{"email":"\\ud800@example.com","password":"x"}', 'email'],
      ['{"email":"a@example.com","password":"\\udc00"}', 'password'],
      ['{"email":"a@example.com","\\u0000":"x"}', '\u0000'],
    ];
    for (const [raw, field] of cases) {
      const res = await post('/v1/auth/signup', raw);
      const body = (await res.json()) as Record<string, unknown>;
      expect({ status: res.status, field: String(body['field']).split(/[.[]/)[0] }).toEqual({
        status: 400,
        field,
      });
    }
  });

  it('holds path segments and query values to the same text rules as bodies', async () => {
    const seg = await fetch(`${base}/v1/share/a%00b`);
    expect(seg.status).toBe(400);
    expect(await seg.json()).toMatchObject({ field: 'share_id' });
    const query = await fetch(`${base}/v1/openapi.json?x=a%00b`);
    expect([query.status, ((await query.json()) as Record<string, unknown>)['field']]).toEqual([400, 'x']);
  });

  it('reads null optional credentials as absent, and ignores unknown RFC 8693 parameters', async () => {
    // Past the gateway's checks the request needs identity, which is unreachable here: 503, not 400.
    const agent = await post('/v1/auth/agent-token', JSON.stringify({ api_key: 'ocv_x', agent_id: null }));
    expect(agent.status).toBe(503);
    const fed = await post(
      '/v1/auth/federated-token',
      JSON.stringify({
        grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
        resource: 'https://x',
        actor_token: null,
      }),
    );
    expect(fed.status).toBe(503);
  });
});
