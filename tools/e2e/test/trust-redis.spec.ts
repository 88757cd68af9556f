import { randomBytes } from 'node:crypto';
import { waitFor } from '@custos/service-kit/testing';
import { Redis } from 'ioredis';
import { api, decodePayload, quickUser } from '../src/api';
import { type Mesh, SERVICES, startMesh } from '../src/mesh';

// Redis ACL users on a real mesh: the launcher's redis-server has a user per service with only the
// rights of @custos/service-kit (redis-acl.ts), and each service its own REDIS_URL. A process
// holding webhook-dispatcher's REDIS_URL can read the token revocations (its job) but cannot delete
// one, nor mark the active signing key revoked to lock everyone out, nor touch the gateway's
// rate-limit buckets; a revoked token stays revoked. The services themselves work under their
// users: the gateway's rate limiter writes its buckets, and nothing logs a refused command.
describe('Redis trust: what webhook-dispatcher’s REDIS_URL can and cannot do', () => {
  let mesh: Mesh;
  const clients: Redis[] = [];

  /** A client exactly as a service makes one from its REDIS_URL. */
  function connect(url: string): Redis {
    const c = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true });
    c.on('error', () => undefined);
    clients.push(c);
    return c;
  }

  beforeAll(async () => {
    mesh = await startMesh({ extraEnv: { EMAIL_VERIFICATION_REQUIRED: 'false' } });
    if (!mesh.redis) throw new Error('the mesh runs no redis-server of its own (mesh.redis is missing)');
  });

  afterAll(async () => {
    await Promise.all(
      clients.filter((c) => c.status === 'ready').map((c) => c.quit().catch(() => undefined)),
    );
    await mesh?.stop();
  });

  it('gives each service that uses Redis its own user, and no service the test user', () => {
    const users = Object.entries(mesh.redis!.urls).map(([s, url]) => [s, new URL(url).username]);
    expect(Object.fromEntries(users)).toEqual({
      gateway: 'custos_gateway',
      identity: 'custos_identity',
      'vault-crypto': 'custos_vault_crypto',
      policy: 'custos_policy',
      audit: 'custos_audit',
      'webhook-dispatcher': 'custos_webhook_dispatcher',
      approvals: 'custos_approvals',
      billing: 'custos_billing',
      signer: 'custos_signer',
    });
    expect(new URL(mesh.redis!.testUrl).username).toBe('custos_test');
  });

  it('refuses to delete a revocation or revoke the active key, and the revoked token stays revoked', async () => {
    const user = await quickUser(mesh);
    const [header] = user.token.split('.');
    const kid = String(
      (JSON.parse(Buffer.from(header!, 'base64url').toString('utf8')) as { kid: string }).kid,
    );
    const claims = decodePayload(user.token);

    // Signing out revokes the token (identity writes the revocation into Redis as its own user).
    expect((await api(mesh, 'GET', '/v1/vaults', { token: user.token })).status).toBe(200);
    expect((await api(mesh, 'DELETE', '/v1/auth/token', { token: user.token })).status).toBe(204);
    expect((await api(mesh, 'GET', '/v1/vaults', { token: user.token })).status).toBe(401);

    const admin = connect(mesh.redis!.testUrl);
    const keys = (await admin.keys('custos:revoked:*')).filter(
      (k) =>
        k === `custos:revoked:jti:${String(claims['jti'])}` ||
        k === `custos:revoked:sid:${String(claims['sid'])}`,
    );
    expect(keys.length).toBeGreaterThan(0);

    const dispatcher = connect(mesh.redis!.urls['webhook-dispatcher']);
    // Its job: read the revocations (what every verification does).
    expect(await dispatcher.mget(...keys)).toEqual(keys.map(() => expect.any(String)));
    // Not its job: delete them, or mark the active signing key revoked (everyone signed out).
    for (const k of keys) {
      await expect(dispatcher.del(k)).rejects.toThrow(/^NOPERM/);
      await expect(dispatcher.set(k, '0')).rejects.toThrow(/^NOPERM/);
      await expect(dispatcher.pexpire(k, 1)).rejects.toThrow(/^NOPERM/);
    }
    await expect(dispatcher.set(`custos:revoked:kid:${kid}`, '1')).rejects.toThrow(/^NOPERM/);
    await expect(dispatcher.eval("return redis.call('DEL', KEYS[1])", 1, keys[0]!)).rejects.toThrow(
      /^NOPERM/,
    );
    await expect(dispatcher.call('flushall')).rejects.toThrow(/^NOPERM/);
    await expect(dispatcher.call('keys', '*')).rejects.toThrow(/^NOPERM/);

    expect(await admin.mget(...keys)).toEqual(keys.map(() => expect.any(String)));
    expect(await admin.exists(`custos:revoked:kid:${kid}`)).toBe(0);
    expect((await api(mesh, 'GET', '/v1/vaults', { token: user.token })).status).toBe(401);
    // The active key still signs: a fresh sign-in works.
    const again = await quickUser(mesh);
    expect((await api(mesh, 'GET', '/v1/vaults', { token: again.token })).status).toBe(200);
  });

  it('cannot read, reset or fill the gateway’s rate-limit buckets', async () => {
    // Any request goes through the gateway's limiter, which keeps its bucket as its own user.
    expect((await api(mesh, 'GET', '/v1/health')).status).toBe(200);
    const admin = connect(mesh.redis!.testUrl);
    let buckets: string[] = [];
    await waitFor(async () => {
      buckets = await admin.keys('custos:rl:*');
      return buckets.length > 0;
    }, 10_000);
    const dispatcher = connect(mesh.redis!.urls['webhook-dispatcher']);
    const bucket = buckets[0]!;
    await expect(dispatcher.hmget(bucket, 't', 'ts')).rejects.toThrow(/^NOPERM/);
    await expect(dispatcher.del(bucket)).rejects.toThrow(/^NOPERM/);
    await expect(dispatcher.hset(bucket, 't', '0', 'ts', String(Date.now()))).rejects.toThrow(/^NOPERM/);
    await expect(
      dispatcher.hset(`custos:rl:global:${randomBytes(4).toString('hex')}`, 't', '0'),
    ).rejects.toThrow(/^NOPERM/);
    expect(await admin.exists(bucket)).toBe(1);
  });

  it('no service was refused a command it needs', async () => {
    // Every service has connected and verified tokens by now; a missing right would show as a
    // NOPERM, a skipped ready check (INFO refused) or the gateway letting requests through unlimited.
    await new Promise((r) => setTimeout(r, 500));
    expect((mesh.output.get('gateway') ?? []).length).toBeGreaterThan(0);
    for (const s of SERVICES) {
      const lines = (mesh.output.get(s) ?? []).filter((l) =>
        /NOPERM|Skipping the ready check|rate limiter unavailable|WRONGPASS|NOAUTH/.test(l),
      );
      expect({ service: s, lines }).toEqual({ service: s, lines: [] });
    }
  });
});
