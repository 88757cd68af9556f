import http from 'node:http';
import { generateKeyPairSync, randomBytes, randomUUID, sign } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { IdentityKeys, revocationKey } from '@custos/auth';
import {
  type AsyncService,
  GrpcServer,
  MESH_SERVICES,
  MeshTls,
  NotFoundError,
  PermissionDeniedError,
  ServingStatus,
  createLogger,
  createMetrics,
} from '@custos/service-kit';
import { freePort } from '@custos/service-kit/testing';
import { writeTestMeshCerts } from '@custos/testing';
import { type IdentityServiceServer, IdentityServiceService } from '@custos/proto/custos/identity/v1/service';
import { type PolicyServiceServer, PolicyServiceService } from '@custos/proto/custos/policy/v1/service';
import { type AuditServiceServer, AuditServiceService } from '@custos/proto/custos/audit/v1/service';
import {
  type VaultCryptoServiceServer,
  VaultCryptoServiceService,
} from '@custos/proto/custos/vault_crypto/v1/service';
import { PEERS } from '../src/config';
import { createApp } from '../src/http/app';
import { parseTrustedProxies } from '../src/http/client-ip';
import { connectPeers } from '../src/peers';
import { gatewayRedisOptions } from '../src/redis-options';

// The hot dispatcher (hot-routes.ts) must answer exactly as Express does. Express routes are
// case-insensitive and the dispatcher's are not, so `/v1/VAULTS/...` reaches the same route and
// handler through Express: each request here is sent both ways and the answers compared, byte for
// byte but for the Date header. The peers are real gRPC servers over mTLS with canned answers.

const ISSUER = 'http://127.0.0.1:8080';
const AUDIENCE = 'custos-api';
const BLOCKED_ORG = randomUUID();
const ORG = randomUUID();
const VAULT = randomUUID();
const { privateKey, publicKey } = generateKeyPairSync('ed25519');
const KID = 'test-key';

function b64url(v: unknown): string {
  return Buffer.from(JSON.stringify(v)).toString('base64url');
}

/** An agent access token as identity mints them, signed with the test key. */
function agentToken(org = ORG, extra: Record<string, unknown> = {}): { token: string; jti: string } {
  const now = Math.floor(Date.now() / 1000);
  const jti = randomUUID();
  const head = `${b64url({ alg: 'EdDSA', typ: 'JWT', kid: KID })}.${b64url({
    iss: ISSUER,
    aud: AUDIENCE,
    sub: `agent:${randomUUID()}`,
    org,
    jti,
    iat: now,
    exp: now + 600,
    token_use: 'access',
    scopes: ['read'],
    vault_ids: [VAULT],
    ...extra,
  })}`;
  return { token: `${head}.${sign(null, Buffer.from(head), privateKey).toString('base64url')}`, jti };
}

function unserved<T>(definition: Record<string, unknown>): AsyncService<T> {
  return Object.fromEntries(
    Object.keys(definition).map((k) => [
      k,
      async () => {
        throw new Error(`${k} is not served in this test`);
      },
    ]),
  ) as unknown as AsyncService<T>;
}

const VALUES: Record<string, string> = {
  plain: 'hunter2',
  unicode: 'café ✓ 秘密',
  long: 'x'.repeat(3000),
};

async function startPeers() {
  const logger = createLogger({ service: 'peer', level: 'silent' });
  const certDir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-hot-test-'));
  const { files } = await writeTestMeshCerts(certDir, MESH_SERVICES);
  const tls = (name: string) => new MeshTls(files[name]!);
  const servers: GrpcServer[] = [];
  const addrs: Record<string, string> = {};
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid: KID, alg: 'EdDSA', use: 'sig' };
  for (const p of PEERS) {
    const s = new GrpcServer(logger, createMetrics(p.name), tls(p.name));
    const access = { default: ['gateway'] };
    if (p.name === 'identity') {
      s.add(
        IdentityServiceService,
        {
          ...unserved<IdentityServiceServer>(IdentityServiceService),
          getJwks: async () => ({ jwksJson: JSON.stringify({ keys: [jwk] }), activeKid: KID }),
          mintServiceToken: async () => {
            peerCalls.mint += 1;
            return {
              accessToken: 'service-token',
              expiresAt: String(Math.floor(Date.now() / 1000) + 600),
            };
          },
        },
        access,
      );
    }
    if (p.name === 'policy') {
      s.add(
        PolicyServiceService,
        {
          ...unserved<PolicyServiceServer>(PolicyServiceService),
          // What the test sets: a rule that blocks loopback, where the test calls from, or none.
          getOrgIpRules: async () => ({ rules: policyRules.current }),
        },
        access,
      );
    }
    if (p.name === 'audit') {
      s.add(
        AuditServiceService,
        { ...unserved<AuditServiceServer>(AuditServiceService), recordEvent: async () => ({}) },
        access,
      );
    }
    if (p.name === 'vault-crypto') {
      s.add(
        VaultCryptoServiceService,
        {
          ...unserved<VaultCryptoServiceServer>(VaultCryptoServiceService),
          getSecret: async (
            req: { vaultId: string; path: string },
            call: { metadata: { get(k: string): unknown[] } },
          ) => {
            peerCalls.getSecretAuth.push(String(call.metadata.get('authorization')[0]));
            const leaf = req.path.split('/').at(-1)!;
            if (leaf === 'missing') throw new NotFoundError(`no secret at ${req.path}`);
            if (leaf === 'denied') throw new PermissionDeniedError('no grant allows reading this secret');
            return {
              secret: {
                id: '11111111-1111-4111-8111-111111111111',
                path: req.path,
                type: 'api_key',
                version: 3,
                metadata: { owner: 'ops' },
                createdAt: '2026-01-02T03:04:05.000Z',
                expiresAt: '',
                accessCount: '0',
                maxAccessCount: '0',
              },
              value: VALUES[leaf] ?? `value of ${req.path}`,
              valueEncoding: 'utf8',
            };
          },
        } as AsyncService<VaultCryptoServiceServer>,
        access,
      );
    }
    const port = await s.listen('127.0.0.1', 0);
    s.health.setAll(ServingStatus.SERVING);
    servers.push(s);
    addrs[p.variable] = `127.0.0.1:${port}`;
  }
  return {
    servers,
    addrs,
    gatewayTls: tls('gateway'),
    removeCerts: () => fs.rmSync(certDir, { recursive: true, force: true }),
  };
}

const policyRules: { current: unknown[] } = { current: [] };
const peerCalls = { mint: 0, getSecretAuth: [] as string[] };

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function request(base: string, urlPath: string, headers: Record<string, string>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${urlPath}`, { method: 'GET', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const h = { ...res.headers };
        delete h.date;
        resolve({ status: res.statusCode ?? 0, headers: h, body: Buffer.concat(chunks).toString('utf8') });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

describe('hot dispatcher', () => {
  let peers: Awaited<ReturnType<typeof startPeers>>;
  const logLines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logLines.push(chunk.toString('utf8'));
      cb();
    },
  });
  const logger = createLogger({ service: 'hot-test', level: 'info', destination: sink });
  const cleanups: Array<() => Promise<void> | void> = [];

  beforeAll(async () => {
    peers = await startPeers();
  });

  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
    for (const s of peers.servers) await s.shutdown(100);
    peers.removeCerts();
  });

  async function serve(opts: { rps?: number; burst?: number } = {}) {
    const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
    const redis = new Redis(url, {
      ...gatewayRedisOptions(url),
      keyPrefix: `hot-test-${randomBytes(4).toString('hex')}:`,
      maxRetriesPerRequest: 0,
      disconnectTimeout: 100,
    });
    await redis.connect();
    const p = connectPeers(
      {
        ...(peers.addrs as Record<(typeof PEERS)[number]['variable'], string>),
        GRPC_DEADLINE_MS: 2000,
      },
      peers.gatewayTls,
    );
    const app = createApp({
      logger,
      registry: createMetrics('hot-test').registry,
      redis,
      peers: p,
      trustedProxies: parseTrustedProxies([]),
      rateLimit: { ratePerSecond: opts.rps ?? 1000, burst: opts.burst ?? 1000 },
      healthTimeoutMs: 1000,
      identityKeys: IdentityKeys.overGrpc(p.identity, redis, logger, {
        issuers: [ISSUER],
        audience: AUDIENCE,
      }),
      ipRulesCacheTtlMs: 0,
    });
    // Counts the requests that go on to Express's own chain (a layer right after the dispatcher),
    // so the test knows which path answered.
    const reached: string[] = [];
    app.use((req, _res, next) => {
      reached.push(req.url);
      next();
    });
    const stack = (app as unknown as { router: { stack: unknown[] } }).router.stack;
    stack.splice(1, 0, stack.pop());
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
    return { base: `http://127.0.0.1:${port}`, redis, reached };
  }

  /** The answer of the dispatcher and of Express to the same request (same request id). */
  async function both(
    served: { base: string; reached: string[] },
    secretPath: string,
    headers: Record<string, string> = {},
  ) {
    const h = { 'x-request-id': `hot-${randomBytes(6).toString('hex')}`, ...headers };
    const before = served.reached.length;
    const hot = await request(served.base, `/v1/vaults/${secretPath}`, h);
    expect(served.reached.length).toBe(before);
    const viaExpress = await request(served.base, `/v1/VAULTS/${secretPath}`, h);
    expect(served.reached.slice(before)).toEqual([`/v1/VAULTS/${secretPath}`]);
    return { hot, viaExpress };
  }

  it('answers reads, refusals and peer errors exactly as Express does', async () => {
    const served = await serve();
    const { base, redis } = served;
    const { token } = agentToken();
    const auth = { authorization: `Bearer ${token}` };
    const cases: Array<[string, Record<string, string>, number]> = [
      [`${VAULT}/secrets/app/plain`, auth, 200],
      [`${VAULT}/secrets/unicode`, auth, 200],
      [`${VAULT}/secrets/a/b/c/long`, auth, 200],
      [`${VAULT}/secrets/app/plain`, { ...auth, 'x-passkey-token': 'pk' }, 200],
      [`${VAULT}/secrets/app/missing`, auth, 404],
      [`${VAULT}/secrets/app/denied`, auth, 403],
      [`${'v'.repeat(201)}/secrets/app/plain`, auth, 400],
      [`${VAULT}/secrets/app/plain`, {}, 401],
      [`${VAULT}/secrets/app/plain`, { authorization: 'Bearer not.a.jwt' }, 401],
      [
        `${VAULT}/secrets/app/plain`,
        { authorization: `Bearer ${agentToken(ORG, { role: 'x' }).token}` },
        401,
      ],
    ];
    for (const [p, headers, status] of cases) {
      const { hot, viaExpress } = await both(served, p, headers);
      expect({ p, status: hot.status }).toEqual({ p, status });
      expect(hot).toEqual(viaExpress);
    }
    // vault-crypto got the token identity minted for it, minted once per caller and peer (it and
    // policy, for the IP rules) and then reused.
    expect(peerCalls.getSecretAuth.length).toBeGreaterThan(10);
    expect(new Set(peerCalls.getSecretAuth)).toEqual(new Set(['Bearer service-token']));
    expect(peerCalls.mint).toBe(2);
    const ok = await request(base, `/v1/vaults/${VAULT}/secrets/unicode`, auth);
    expect(JSON.parse(ok.body)).toMatchObject({ path: 'unicode', value: VALUES.unicode, version: 3 });
    expect(ok.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(ok.headers['content-length']).toBe(String(Buffer.byteLength(ok.body)));
    expect(ok.headers['cache-control']).toBe('no-store');

    // A revoked token is refused on both paths.
    const revoked = agentToken();
    await redis.set(revocationKey('jti', revoked.jti), '1');
    const r = await both(served, `${VAULT}/secrets/app/plain`, { authorization: `Bearer ${revoked.token}` });
    expect(r.hot.status).toBe(401);
    expect(r.hot).toEqual(r.viaExpress);
  });

  it("refuses a client the org's IP rules block, as Express does", async () => {
    const served = await serve();
    policyRules.current = [
      {
        id: '22222222-2222-4222-8222-222222222222',
        orgId: BLOCKED_ORG,
        cidr: '127.0.0.0/8',
        ruleType: 'block',
        description: '',
        createdBy: '33333333-3333-4333-8333-333333333333',
        createdByType: 'user',
        createdAt: '2026-01-01T00:00:00.000Z',
      },
    ];
    try {
      const { token } = agentToken(BLOCKED_ORG);
      const { hot, viaExpress } = await both(served, `${VAULT}/secrets/app/plain`, {
        authorization: `Bearer ${token}`,
      });
      expect(hot.status).toBe(403);
      expect(JSON.parse(hot.body)).toMatchObject({ type: 'ip_denied' });
      expect(hot).toEqual(viaExpress);
    } finally {
      policyRules.current = [];
    }
  });

  it('answers 429 with Retry-After past the burst, as Express does', async () => {
    const served = await serve({ rps: 0.001, burst: 2 });
    const { token } = agentToken();
    const auth = { authorization: `Bearer ${token}` };
    const first = await both(served, `${VAULT}/secrets/app/plain`, auth);
    expect([first.hot.status, first.viaExpress.status]).toEqual([200, 200]);
    const limited = await both(served, `${VAULT}/secrets/app/plain`, auth);
    expect(limited.hot.status).toBe(429);
    expect(limited.hot.headers['retry-after']).toMatch(/^\d+$/);
    expect(limited.hot).toEqual(limited.viaExpress);
  });

  it('logs one access line per request with the route, and leaves other requests to Express', async () => {
    const { base, reached } = await serve();
    const { token } = agentToken();
    const auth = { authorization: `Bearer ${token}` };
    const id = `hot-log-${randomBytes(4).toString('hex')}`;
    await request(base, `/v1/vaults/${VAULT}/secrets/app/plain`, { ...auth, 'x-request-id': id });
    await new Promise((r) => setTimeout(r, 50));
    const lines = logLines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.request_id === id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      msg: 'request',
      method: 'GET',
      path: `/v1/vaults/${VAULT}/secrets/app/plain`,
      status: 200,
      client_ip: '127.0.0.1',
    });
    expect(reached).toEqual([]);
    // Requests the dispatcher does not take still reach the route through Express.
    const withQuery = await request(base, `/v1/vaults/${VAULT}/secrets/app/plain?x=1`, auth);
    expect(withQuery.status).toBe(200);
    const encoded = await request(base, `/v1/vaults/${VAULT}/secrets/app%2Fplain`, auth);
    expect(JSON.parse(encoded.body)).toMatchObject({ path: 'app/plain' });
    // A conditional GET goes through Express too, and still gets the value: the read was counted
    // and audited, so a 304 without a body would lose it (Express's freshness check answers
    // `If-None-Match: *` with 304).
    const conditional = await request(base, `/v1/vaults/${VAULT}/secrets/app/plain`, {
      ...auth,
      'if-none-match': '*',
    });
    expect(conditional.status).toBe(200);
    expect(JSON.parse(conditional.body)).toMatchObject({ path: 'app/plain' });
    expect(reached).toHaveLength(3);
  });
});
