import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type Principal, redisRevocationCheck, revocationKey } from '@custos/auth';
import {
  REDIS_SERVICE_NAMES,
  type RedisService,
  redisAclFile,
  redisUserOf,
} from '@custos/service-kit/redis-acl';
import { freePort, waitFor } from '@custos/service-kit/testing';
import { Redis } from 'ioredis';
import { tokenBucket } from '../src/http/rate-limit';
import { gatewayRedisOptions } from '../src/redis-options';

// The Redis ACL users of @custos/service-kit (redis-acl.ts) on a real redis-server started with
// the ACL file they render, each client connecting as the services do (a REDIS_URL with its user
// and password): identity writes revocations; the gateway runs its token bucket and reads the
// revocations; a revocation reader (webhook-dispatcher's user) reads them and can do nothing else.
describe('Redis ACL users on a real redis-server', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-redis-acl-'));
  const passwords = Object.fromEntries(
    REDIS_SERVICE_NAMES.map((s) => [s, randomBytes(18).toString('base64url')]),
  ) as Record<RedisService, string>;
  const testPassword = randomBytes(18).toString('base64url');
  let port: number;
  let server: ChildProcess;
  let serverLog = '';
  const clients: Redis[] = [];
  const unique = () => randomBytes(6).toString('hex');

  /** A client as a service makes it from its REDIS_URL. */
  function client(url: string): Redis {
    const c = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    c.on('error', () => undefined);
    clients.push(c);
    return c;
  }
  const urlOf = (user: string, password: string, db = '') =>
    `redis://${user}:${password}@127.0.0.1:${port}${db}`;
  const as = (service: RedisService, db = '') => client(urlOf(redisUserOf(service), passwords[service], db));
  const asTest = () => client(urlOf('custos_test', testPassword));

  const principal = (tokenId: string, sessionId?: string): Principal => ({
    kind: 'user',
    userId: 'u1',
    orgId: 'o1',
    role: 'owner',
    platformAdmin: false,
    amr: ['pwd'],
    requirePasskeyForVaults: false,
    tokenId,
    issuedAt: Math.floor(Date.now() / 1000),
    expiresAt: Math.floor(Date.now() / 1000) + 900,
    issuer: 'http://127.0.0.1:8080',
    ...(sessionId ? { sessionId } : {}),
  });

  beforeAll(async () => {
    const aclFile = path.join(dir, 'users.acl');
    fs.writeFileSync(aclFile, redisAclFile({ passwords, testPassword }), { mode: 0o600 });
    port = await freePort();
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    server = spawn(
      process.env.REDIS_SERVER_BIN || 'redis-server',
      [...args, '--dir', dir, '--aclfile', aclFile],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    server.stdout!.on('data', (d: Buffer) => (serverLog += d.toString()));
    server.stderr!.on('data', (d: Buffer) => (serverLog += d.toString()));
    try {
      await waitFor(async () => (await asTest().ping()) === 'PONG', 10_000);
    } catch (err) {
      throw new Error(`redis-server did not accept the ACL file: ${(err as Error).message}\n${serverLog}`);
    }
  });

  afterAll(async () => {
    // Clients refused at connect have ended already; ending them again leaves a timer behind.
    await Promise.all(
      clients.filter((c) => c.status === 'ready').map((c) => c.quit().catch(() => undefined)),
    );
    await new Promise<void>((resolve) => {
      if (!server || server.exitCode !== null) return resolve();
      server.once('exit', () => resolve());
      server.kill('SIGTERM');
    });
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('lets identity write revocations as it does (SET … PX), which every reader then sees', async () => {
    const identity = as('identity');
    const jti = unique();
    expect(await identity.set(revocationKey('jti', jti), '1', 'PX', 60_000)).toBe('OK');
    // Identity's own verifier, the gateway's and a revocation reader's: the same MGET check.
    for (const service of ['identity', 'gateway', 'webhook-dispatcher'] as const) {
      const isRevoked = redisRevocationCheck(as(service));
      expect({ service, revoked: await isRevoked(principal(jti), 'kid-1') }).toEqual({
        service,
        revoked: true,
      });
      expect({ service, revoked: await isRevoked(principal(unique()), 'kid-1') }).toEqual({
        service,
        revoked: false,
      });
    }
  });

  it('lets the gateway run its token bucket (EVAL, then EVALSHA) on custos:rl:*', async () => {
    const gateway = as('gateway');
    const take = tokenBucket(gateway, { ratePerSecond: 0.5, burst: 2 });
    const key = `custos:rl:global:${unique()}`;
    // The first call on a connection is EVAL, the next ones EVALSHA: both are allowed.
    expect(await take(key)).toEqual({ allowed: true });
    expect(await take(key)).toEqual({ allowed: true });
    expect((await take(key)).allowed).toBe(false);
    expect(await asTest().hget(key, 't')).not.toBeNull();
  });

  it('serves the gateway’s auto-pipelined client (as main.ts makes it) with the same commands, each request its own answer', async () => {
    const url = urlOf(redisUserOf('gateway'), passwords.gateway);
    const gateway = new Redis(url, { ...gatewayRedisOptions(url), retryStrategy: () => null });
    gateway.on('error', () => undefined);
    clients.push(gateway);
    await gateway.connect();
    const take = tokenBucket(gateway, { ratePerSecond: 0.01, burst: 5 });
    const isRevoked = redisRevocationCheck(gateway);
    const bucket = `custos:rl:global:${unique()}`;
    const revoked = unique();
    await as('identity').set(revocationKey('jti', revoked), '1', 'PX', 60_000);
    // Twenty requests at once, as concurrent HTTP requests reach the limiter and the revocation
    // check: their commands queue into shared pipelines (the first run of the script is an EVAL
    // inside one), and each request still gets its own verdict.
    const takes = Array.from({ length: 20 }, () => take(bucket));
    const checks = Array.from({ length: 20 }, (_, i) =>
      isRevoked(principal(i === 7 ? revoked : unique()), 'kid-1'),
    );
    expect(gateway.autoPipelineQueueSize).toBeGreaterThan(1);
    const verdicts = await Promise.all(takes);
    expect(verdicts.filter((v) => v.allowed)).toHaveLength(5);
    expect(await Promise.all(checks)).toEqual(Array.from({ length: 20 }, (_, i) => i === 7));
    // A revocation identity stores is refused on the very next check.
    const next = unique();
    expect(await isRevoked(principal(next), 'kid-1')).toBe(false);
    await as('identity').set(revocationKey('jti', next), '1', 'PX', 60_000);
    expect(await isRevoked(principal(next), 'kid-1')).toBe(true);
  });

  it('lets a service connect without a refused ready check (INFO) or SELECT of its URL’s database', async () => {
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      const reader = as('webhook-dispatcher', '/1');
      await reader.connect();
      expect(reader.status).toBe('ready');
      expect(await reader.mget(revocationKey('jti', unique()))).toEqual([null]);
      // ioredis warns "Skipping the ready check" when INFO is refused.
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  });

  describe('a revocation reader (webhook-dispatcher)', () => {
    let reader: Redis;
    let kept: string;
    beforeAll(async () => {
      reader = as('webhook-dispatcher');
      kept = revocationKey('jti', unique());
      await as('identity').set(kept, '1', 'PX', 60_000);
    });

    it.each([
      ['DEL a revocation', ['del', 'K']],
      ['UNLINK a revocation', ['unlink', 'K']],
      ['SET a revocation', ['set', 'K', '0']],
      ['PEXPIRE a revocation', ['pexpire', 'K', '1']],
      ['SET a kid revocation (everyone locked out)', ['set', 'custos:revoked:kid:active-kid', '1']],
      ['write a rate-limit bucket', ['hset', 'custos:rl:global:1.2.3.4', 't', '0']],
      ['read a rate-limit bucket', ['hmget', 'custos:rl:global:1.2.3.4', 't']],
      ['MGET a rate-limit bucket', ['mget', 'custos:rl:global:1.2.3.4']],
      ['run a script', ['eval', "return redis.call('DEL', KEYS[1])", '1', 'K']],
      ['FLUSHALL', ['flushall']],
      ['FLUSHDB', ['flushdb']],
      ['list the keys', ['keys', '*']],
      ['SCAN', ['scan', '0']],
      ['read the configuration', ['config', 'get', '*']],
      ['read the ACL users', ['acl', 'list']],
      ['list the clients', ['client', 'list']],
      ['list the modules', ['module', 'list']],
      ['flush the scripts', ['script', 'flush']],
      ['publish', ['publish', 'c', 'm']],
    ])('may not %s (NOPERM)', async (_what, [command, ...args]) => {
      const argv = args.map((a) => (a === 'K' ? kept : a));
      await expect(reader.call(command!, ...argv)).rejects.toThrow(/^NOPERM/);
    });

    it('leaves the revocation in place, still seen by the gateway', async () => {
      expect(await asTest().get(kept)).toBe('1');
      expect(await redisRevocationCheck(as('gateway'))(principal(kept.split(':').pop()!), 'k')).toBe(true);
    });

    it('cannot use the token bucket', async () => {
      await expect(
        tokenBucket(reader, { ratePerSecond: 1, burst: 1 })(`custos:rl:x:${unique()}`),
      ).rejects.toThrow(/NOPERM/);
    });
  });

  it('the gateway cannot write revocations, directly or from a script', async () => {
    const gateway = as('gateway');
    const key = revocationKey('kid', 'active-kid');
    await expect(gateway.set(key, '1')).rejects.toThrow(/^NOPERM/);
    await expect(gateway.call('del', key)).rejects.toThrow(/^NOPERM/);
    // Declared keys and keys a script names itself are both checked against the user.
    await expect(gateway.eval("return redis.call('HSET', KEYS[1], 'a', 1)", 1, key)).rejects.toThrow(
      /NOPERM/,
    );
    await expect(gateway.eval(`return redis.call('HSET', '${key}', 'a', 1)`, 0)).rejects.toThrow(
      /can't access|NOPERM/,
    );
    await expect(gateway.call('flushall')).rejects.toThrow(/^NOPERM/);
    expect(await asTest().exists(key)).toBe(0);
  });

  it('identity cannot touch the rate-limit buckets or delete anything', async () => {
    const identity = as('identity');
    await expect(identity.call('hset', 'custos:rl:global:1.2.3.4', 't', '0')).rejects.toThrow(/^NOPERM/);
    await expect(identity.call('del', revocationKey('jti', 'x'))).rejects.toThrow(/^NOPERM/);
    await expect(identity.call('flushall')).rejects.toThrow(/^NOPERM/);
  });

  it('refuses a wrong password, another service’s password, and the default user', async () => {
    const refused = async (url: string) => {
      const c = client(url);
      const errors: string[] = [];
      c.on('error', (err: Error) => errors.push(err.message));
      await expect(c.connect()).rejects.toThrow();
      expect(errors).toEqual([expect.stringMatching(/^WRONGPASS/)]);
    };
    await refused(urlOf(redisUserOf('webhook-dispatcher'), 'not-the-password'));
    await refused(urlOf(redisUserOf('webhook-dispatcher'), passwords.identity));
    // A URL without a user name authenticates as `default`, which is off.
    await refused(`redis://:${passwords.gateway}@127.0.0.1:${port}`);
    // No credentials at all: every command needs AUTH first.
    const anonymous = client(`redis://127.0.0.1:${port}`);
    await expect(anonymous.call('mget', revocationKey('jti', 'x'))).rejects.toThrow(/NOAUTH/);
  });
});
