import http from 'node:http';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { IdentityKeys } from '@custos/auth';
import {
  type AsyncService,
  GrpcServer,
  MESH_SERVICES,
  MeshTls,
  ServingStatus,
  createLogger,
  createMetrics,
} from '@custos/service-kit';
import { freePort } from '@custos/service-kit/testing';
import { writeTestMeshCerts } from '@custos/testing';
import {
  type VaultCryptoServiceServer,
  VaultCryptoServiceService,
} from '@custos/proto/custos/vault_crypto/v1/service';
import { PEERS } from '../src/config';
import { createApp } from '../src/http/app';
import { ROUTE_TABLE } from '../src/http/routes';
import { parseTrustedProxies } from '../src/http/client-ip';
import { connectPeers } from '../src/peers';
import { gatewayRedisOptions } from '../src/redis-options';

/** Real gRPC servers on loopback, over mTLS with their own certificates, in place of the eight peers. */
async function startPeerServers() {
  const logger = createLogger({ service: 'peer', level: 'silent' });
  const certDir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-gateway-test-'));
  const { files } = await writeTestMeshCerts(certDir, MESH_SERVICES);
  const tls = (name: string) => new MeshTls(files[name]!);
  const servers: Record<string, GrpcServer> = {};
  const addrs: Record<string, string> = {};
  for (const p of PEERS) {
    const s = new GrpcServer(logger, createMetrics(p.name), tls(p.name));
    if (p.name === 'vault-crypto') {
      // Only the health RPC is exercised here; the rest answer as a server that lacks them would.
      const others = Object.fromEntries(
        Object.keys(VaultCryptoServiceService).map((k) => [
          k,
          async () => {
            throw new Error(`${k} is not served in this test`);
          },
        ]),
      ) as unknown as AsyncService<VaultCryptoServiceServer>;
      s.add(
        VaultCryptoServiceService,
        {
          ...others,
          getKmsHealth: async () => ({
            provider: 'local',
            healthy: false,
            detail: 'master key unavailable',
            latencyMs: 1.5,
          }),
        },
        { default: ['gateway'] },
      );
    }
    const port = await s.listen('127.0.0.1', 0);
    s.health.setAll(ServingStatus.SERVING);
    servers[p.name] = s;
    addrs[p.variable] = `127.0.0.1:${port}`;
  }
  return {
    servers,
    addrs,
    gatewayTls: tls('gateway'),
    removeCerts: () => fs.rmSync(certDir, { recursive: true, force: true }),
  };
}

describe('gateway HTTP pipeline', () => {
  let peers: Awaited<ReturnType<typeof startPeerServers>>;
  const logLines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logLines.push(chunk.toString('utf8'));
      cb();
    },
  });
  const logger = createLogger({ service: 'gateway-test', level: 'info', destination: sink });
  const cleanups: Array<() => Promise<void> | void> = [];

  beforeAll(async () => {
    peers = await startPeerServers();
  });

  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
    for (const s of Object.values(peers.servers)) await s.shutdown(100);
    peers.removeCerts();
  });

  async function serve(
    opts: { rps?: number; burst?: number; redisUrl?: string; trusted?: string[]; authBurst?: number } = {},
  ) {
    const url = opts.redisUrl ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
    // The gateway's own client options (auto-pipelined), in a key space of this test.
    const redis = new Redis(url, {
      ...gatewayRedisOptions(url),
      keyPrefix: `test-${randomBytes(4).toString('hex')}:`,
      maxRetriesPerRequest: 0,
      disconnectTimeout: 100,
    });
    redis.on('error', () => undefined);
    await redis.connect().catch(() => undefined);
    const p = connectPeers(
      {
        ...(peers.addrs as Record<(typeof PEERS)[number]['variable'], string>),
        GRPC_DEADLINE_MS: 2000,
      },
      peers.gatewayTls,
    );
    const app = createApp({
      logger,
      registry: createMetrics('gateway-test').registry,
      redis,
      peers: p,
      trustedProxies: parseTrustedProxies(opts.trusted ?? []),
      rateLimit: { ratePerSecond: opts.rps ?? 1000, burst: opts.burst ?? 1000 },
      authRateLimit: { ratePerSecond: 1 / 60, burst: opts.authBurst ?? 1000 },
      healthTimeoutMs: 1000,
      identityKeys: IdentityKeys.overGrpc(p.identity, redis, logger, {
        issuers: ['http://127.0.0.1:8080'],
        audience: 'custos-api',
      }),
    });
    const port = await freePort();
    const server = http.createServer(app);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    cleanups.push(
      () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        }),
      () => p.close(),
      () => {
        redis.disconnect();
      },
    );
    return `http://127.0.0.1:${port}`;
  }

  it('echoes a well-formed X-Request-Id and replaces a malformed one', async () => {
    const base = await serve();
    const mine = await fetch(`${base}/v1/health`, { headers: { 'x-request-id': 'req-123.abc' } });
    expect(mine.headers.get('x-request-id')).toBe('req-123.abc');
    const bad = await fetch(`${base}/v1/health`, { headers: { 'x-request-id': 'has spaces and <tags>' } });
    expect(bad.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('answers 429 with Retry-After and problem details past the burst, per client IP', async () => {
    const base = await serve({ rps: 1, burst: 3, trusted: ['127.0.0.1'] });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await fetch(`${base}/v1/no-route`)).status);
    expect(statuses).toEqual([404, 404, 404, 429, 429]);
    const limited = await fetch(`${base}/v1/no-route`);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(limited.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await limited.json()).toMatchObject({ status: 429, title: 'Too Many Requests' });
    // Another client behind the trusted proxy has its own bucket.
    const other = await fetch(`${base}/v1/no-route`, { headers: { 'x-forwarded-for': '198.51.100.20' } });
    expect(other.status).toBe(404);
  });

  it('holds parallel requests to the bucket size (the limit is atomic in Redis)', async () => {
    const base = await serve({ rps: 1, burst: 10 });
    const statuses = await Promise.all(
      Array.from({ length: 40 }, () => fetch(`${base}/v1/no-route`).then((r) => r.status)),
    );
    expect(statuses.filter((s) => s === 404)).toHaveLength(10);
    expect(statuses.filter((s) => s === 429)).toHaveLength(30);
  });

  it('holds credential exchanges to the stricter auth limit, leaving other routes alone', async () => {
    const base = await serve({ authBurst: 3 });
    const login = () =>
      fetch(`${base}/v1/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'a@example.com', password: 'x' }),
      }).then((r) => r.status);
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push(await login());
    expect(statuses.slice(0, 3).every((s) => s !== 429)).toBe(true);
    expect(statuses.slice(3)).toEqual([429, 429]);
    expect((await fetch(`${base}/v1/health`)).status).toBe(200);
  });

  it('does not let a spoofed X-Forwarded-For from an untrusted peer escape the limit', async () => {
    const base = await serve({ rps: 1, burst: 2 });
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      statuses.push(
        (await fetch(`${base}/v1/no-route`, { headers: { 'x-forwarded-for': `192.0.2.${i}` } })).status,
      );
    }
    expect(statuses).toEqual([404, 404, 429, 429]);
  });

  it('lets requests through when Redis is unreachable, and says so in the log', async () => {
    const closedPort = await freePort();
    const base = await serve({ rps: 1, burst: 1, redisUrl: `redis://127.0.0.1:${closedPort}` });
    const statuses = await Promise.all(
      [1, 2, 3].map(() => fetch(`${base}/v1/no-route`).then((r) => r.status)),
    );
    expect(statuses).toEqual([404, 404, 404]);
    expect(logLines.some((l) => l.includes('rate limiter unavailable'))).toBe(true);
  });

  it('reports a not-serving peer in /v1/health and an unhealthy KMS in /v1/health/hsm', async () => {
    const base = await serve();
    expect((await fetch(`${base}/v1/health`)).status).toBe(200);
    peers.servers['signer']!.health.setAll(ServingStatus.NOT_SERVING);
    try {
      const res = await fetch(`${base}/v1/health`);
      expect(res.status).toBe(503);
      expect(await res.json()).toMatchObject({
        unavailable: ['signer'],
        services: { signer: 'not_serving' },
      });
    } finally {
      peers.servers['signer']!.health.setAll(ServingStatus.SERVING);
    }
    const hsm = await fetch(`${base}/v1/health/hsm`);
    expect(hsm.status).toBe(503);
    const problem = (await hsm.json()) as Record<string, unknown>;
    expect(problem).toMatchObject({
      status: 503,
      provider: 'local',
      detail: 'key-management provider local failed its self-test',
    });
    // The provider's own message stays in the log.
    expect(JSON.stringify(problem)).not.toContain('master key unavailable');
    expect(logLines.some((l) => l.includes('master key unavailable'))).toBe(true);
  });

  it('never logs the query string, the Authorization header or the body', async () => {
    const base = await serve();
    const secret = `s3cr3t-${randomBytes(6).toString('hex')}`;
    await fetch(`${base}/v1/no-route?token=${secret}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}-jwt`, 'content-type': 'application/json' },
      body: JSON.stringify({ password: `${secret}-pw` }),
    });
    await new Promise((r) => setTimeout(r, 50));
    const all = logLines.join('');
    expect(all).toContain('/v1/no-route');
    expect(all).not.toContain(secret);
  });

  it('serves without a token only the public routes of spec §5.11 (plus the documented MFA and invitation steps)', async () => {
    await serve();
    const spec = new Set([
      'POST /v1/auth/token',
      'POST /v1/auth/agent-token',
      'POST /v1/auth/api-key-token',
      'POST /v1/auth/refresh',
      'GET /v1/auth/jwt-public-key',
      'POST /v1/auth/federated-token',
      'GET /.well-known/jwks.json',
      'GET /.well-known/openid-configuration',
      'POST /v1/auth/signup',
      'POST /v1/auth/verify-email',
      'POST /v1/auth/forgot-password',
      'POST /v1/auth/reset-password',
      'POST /v1/auth/google',
      'GET /v1/health',
      'GET /v1/health/hsm',
      'GET /v1/share/:share_id',
      // Second step of a password sign-in, and accepting an invitation by someone without an account.
      'POST /v1/auth/mfa/verify',
      'POST /v1/org/invites/accept',
      // The undo link of an e-mail change, mailed to the replaced address (issue 16).
      'POST /v1/auth/undo-email-change',
      // The API's own description (issue 12): what a client generator or a person reads first.
      'GET /v1/openapi.json',
    ]);
    const publicRoutes = ROUTE_TABLE.filter((r) => r.access === 'public').map((r) => `${r.method} ${r.path}`);
    expect(publicRoutes.filter((r) => !spec.has(r))).toEqual([]);
    for (const r of ['GET /v1/auth/me', 'DELETE /v1/auth/token', 'POST /v1/agents', 'GET /v1/org/members']) {
      expect(ROUTE_TABLE.find((x) => `${x.method} ${x.path}` === r)?.access).not.toBe('public');
    }
    expect(ROUTE_TABLE.find((x) => x.path === '/v1/auth/me' && x.method === 'GET')?.access).toBe('human');
  });
});
