import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, waitFor } from '@custos/service-kit/testing';
import { Redis } from 'ioredis';
import { verifierRedisOptions } from '../src/identity-keys-connect';

// A real Redis Sentinel setup: a master and a replica (password-protected data), and one sentinel
// with its own ACL user, all started here on free ports. The services' clients are built with the
// same options (verifierRedisOptions / gatewayRedisOptions → redisConnectionOptions).
describe('Redis through Sentinel (REDIS_SENTINELS, REDIS_SENTINEL_MASTER, sentinel credentials)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-redis-sentinel-'));
  const bin = process.env.REDIS_SERVER_BIN || 'redis-server';
  const dataPassword = 'data-pw';
  const sentinelPassword = 'sentinel-pw';
  const procs: ChildProcess[] = [];
  const clients: Redis[] = [];
  let masterPort: number;
  let replicaPort: number;
  let sentinelPort: number;
  // The host of REDIS_URL is ignored with sentinels: an unresolvable one proves it.
  const url = () => `redis://:${dataPassword}@ignored.invalid:1/3`;

  const start = (args: string[]) => {
    const p = spawn(bin, args, { stdio: 'ignore' });
    procs.push(p);
  };
  const direct = (port: number, db = 3) => {
    const c = new Redis({
      port,
      host: '127.0.0.1',
      password: dataPassword,
      db,
      lazyConnect: true,
      retryStrategy: () => null,
      disconnectTimeout: 100,
    });
    c.on('error', () => undefined);
    clients.push(c);
    return c;
  };
  const viaSentinel = (conn: Parameters<typeof verifierRedisOptions>[1]) => {
    const c = new Redis(url(), {
      ...verifierRedisOptions(url(), conn),
      retryStrategy: (n) => (n > 40 ? null : 200),
      disconnectTimeout: 100,
    });
    c.on('error', () => undefined);
    clients.push(c);
    return c;
  };
  const settings = () => ({
    REDIS_SENTINELS: [`127.0.0.1:${sentinelPort}`],
    REDIS_SENTINEL_MASTER: 'custos',
    REDIS_SENTINEL_USERNAME: 'watcher',
    REDIS_SENTINEL_PASSWORD: sentinelPassword,
  });
  const data = ['--bind', '127.0.0.1', '--requirepass', dataPassword, '--masterauth', dataPassword];
  const noDisk = ['--save', '', '--appendonly', 'no', '--dir', dir];

  beforeAll(async () => {
    [masterPort, replicaPort, sentinelPort] = [await freePort(), await freePort(), await freePort()];
    start(['--port', String(masterPort), ...data, ...noDisk]);
    start([
      '--port',
      String(replicaPort),
      ...data,
      ...noDisk,
      '--replicaof',
      '127.0.0.1',
      String(masterPort),
    ]);
    const conf = path.join(dir, 'sentinel.conf');
    fs.writeFileSync(
      conf,
      [
        `port ${sentinelPort}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor custos 127.0.0.1 ${masterPort} 1`,
        `sentinel auth-pass custos ${dataPassword}`,
        'sentinel down-after-milliseconds custos 2000',
        'sentinel failover-timeout custos 10000',
        // The sentinel's own users: no anonymous access, one user for the services.
        'user default off',
        `user watcher on >${sentinelPassword} allchannels +@all`,
        '',
      ].join('\n'),
    );
    start([conf, '--sentinel']);
    // Ready when the sentinel knows the master and its replica.
    const admin = new Redis({
      port: sentinelPort,
      host: '127.0.0.1',
      username: 'watcher',
      password: sentinelPassword,
      lazyConnect: true,
      retryStrategy: () => 100,
      disconnectTimeout: 100,
    });
    admin.on('error', () => undefined);
    clients.push(admin);
    await waitFor(async () => {
      const replicas = (await admin.call('SENTINEL', 'REPLICAS', 'custos').catch(() => [])) as string[][];
      return replicas.some((r) => r.includes(String(replicaPort)));
    }, 30_000);
  }, 40_000);

  afterAll(async () => {
    // Clients that ended already (refused at connect) would leave a timer behind if ended again;
    // disconnect, not QUIT, which a sentinel does not know.
    for (const c of clients) if (c.status !== 'end') c.disconnect();
    await Promise.all(
      procs.map(
        (p) =>
          new Promise<void>((resolve) => {
            if (p.exitCode !== null) return resolve();
            p.once('exit', () => resolve());
            p.kill('SIGTERM');
          }),
      ),
    );
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('asks the sentinel for the master and reads and writes there, with the data password and database of REDIS_URL', async () => {
    const c = viaSentinel(settings());
    await c.set('custos:sentinel:k', 'v1');
    expect(await c.get('custos:sentinel:k')).toBe('v1');
    // It landed on the master, in database 3 of the URL.
    const master = direct(masterPort);
    expect(await master.get('custos:sentinel:k')).toBe('v1');
    expect(await direct(masterPort, 0).get('custos:sentinel:k')).toBeNull();
  });

  it('is refused by a sentinel when its own password is wrong or missing (the data password is not the sentinel one)', async () => {
    for (const bad of [
      { ...settings(), REDIS_SENTINEL_PASSWORD: 'wrong' },
      { ...settings(), REDIS_SENTINEL_USERNAME: undefined, REDIS_SENTINEL_PASSWORD: undefined },
    ]) {
      const c = new Redis(url(), {
        ...verifierRedisOptions(url(), bad),
        retryStrategy: () => null,
        sentinelRetryStrategy: () => null,
        disconnectTimeout: 100,
      });
      c.on('error', () => undefined);
      clients.push(c);
      await expect(c.ping()).rejects.toThrow();
    }
  });

  it('follows a failover: after SENTINEL FAILOVER writes go to the promoted replica', async () => {
    const c = viaSentinel(settings());
    await c.set('custos:sentinel:before', '1');
    const admin = new Redis({
      port: sentinelPort,
      host: '127.0.0.1',
      username: 'watcher',
      password: sentinelPassword,
      disconnectTimeout: 100,
    });
    admin.on('error', () => undefined);
    clients.push(admin);
    // The replica must have caught up before the sentinel promotes it.
    await waitFor(async () => (await direct(replicaPort).get('custos:sentinel:before')) === '1', 10_000);
    await admin.call('SENTINEL', 'FAILOVER', 'custos');
    await waitFor(async () => {
      const addr = (await admin.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', 'custos')) as string[];
      return addr[1] === String(replicaPort);
    }, 30_000);
    // Until the old master is demoted it still takes writes (lost when it turns replica): wait for it.
    await waitFor(async () => (await direct(masterPort).info('replication')).includes('role:slave'), 30_000);
    // The client is still on the old master: its first write is READONLY, it reconnects through the
    // sentinel, and writes succeed again on the new master.
    let readOnly = 0;
    await waitFor(async () => {
      try {
        await c.set('custos:sentinel:after', '2');
        return true;
      } catch (err) {
        if (String(err).includes('READONLY')) readOnly++;
        return false;
      }
    }, 30_000);
    expect(await direct(replicaPort).get('custos:sentinel:after')).toBe('2');
    expect((await direct(replicaPort).info('replication')).includes('role:master')).toBe(true);
    expect(readOnly).toBeLessThanOrEqual(1);
  }, 70_000);
});
