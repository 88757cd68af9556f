import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, waitFor } from '@custos/service-kit/testing';
import { Redis } from 'ioredis';
import { verifierRedisOptions } from '../src/identity-keys-connect';

// Sentinel over TLS: a TLS-only master and a TLS-only sentinel, both with certificates from a private
// CA, started here. A `rediss://` REDIS_URL with REDIS_TLS_CA_FILE makes the services speak TLS to the
// sentinel and to the master it names (redisConnectionOptions: sentinelTLS, enableTLSForSentinelMode).
describe('Redis through Sentinel over TLS (rediss:// REDIS_URL, REDIS_TLS_CA_FILE, REDIS_SENTINELS)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-redis-sentinel-tls-'));
  const file = (name: string) => path.join(dir, name);
  const bin = process.env.REDIS_SERVER_BIN || 'redis-server';
  const dataPassword = 'tls-data-pw';
  const procs: ChildProcess[] = [];
  const clients: Redis[] = [];
  let masterPort: number;
  let sentinelPort: number;
  const url = `rediss://:${dataPassword}@ignored.invalid:1/2`;

  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
  const ca = (name: string) =>
    openssl(
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
      '-subj', `/CN=${name}`, '-keyout', file(`${name}.key`), '-out', file(`${name}.crt`),
    ); // prettier-ignore
  const tls = [
    '--tls-cert-file', file('server.crt'), '--tls-key-file', file('server.key'),
    '--tls-ca-cert-file', file('ca.crt'), '--tls-auth-clients', 'no', '--tls-replication', 'yes',
  ]; // prettier-ignore

  beforeAll(async () => {
    ca('ca');
    ca('other-ca');
    // The sentinel announces the master by IP: the certificate carries that address.
    openssl(
      'req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/CN=127.0.0.1',
      '-keyout', file('server.key'), '-out', file('server.csr'),
    ); // prettier-ignore
    fs.writeFileSync(file('san.ext'), 'subjectAltName=IP:127.0.0.1\n');
    openssl(
      'x509', '-req', '-in', file('server.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'),
      '-CAcreateserial', '-days', '1', '-extfile', file('san.ext'), '-out', file('server.crt'),
    ); // prettier-ignore
    [masterPort, sentinelPort] = [await freePort(), await freePort()];
    procs.push(
      spawn(
        bin,
        ['--port', '0', '--tls-port', String(masterPort), '--bind', '127.0.0.1', '--requirepass', dataPassword,
         ...tls, '--save', '', '--appendonly', 'no', '--dir', dir], // prettier-ignore
        { stdio: 'ignore' },
      ),
    );
    fs.writeFileSync(
      file('sentinel.conf'),
      [
        'port 0',
        `tls-port ${sentinelPort}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `tls-cert-file ${file('server.crt')}`,
        `tls-key-file ${file('server.key')}`,
        `tls-ca-cert-file ${file('ca.crt')}`,
        'tls-auth-clients no',
        'tls-replication yes',
        `sentinel monitor custos 127.0.0.1 ${masterPort} 1`,
        `sentinel auth-pass custos ${dataPassword}`,
        '',
      ].join('\n'),
    );
    procs.push(spawn(bin, [file('sentinel.conf'), '--sentinel'], { stdio: 'ignore' }));
    // Ready when the sentinel names the master (it reaches it over TLS).
    await waitFor(async () => {
      const admin = new Redis({
        port: sentinelPort,
        host: '127.0.0.1',
        tls: { ca: fs.readFileSync(file('ca.crt')) },
        lazyConnect: true,
        retryStrategy: () => null,
      });
      admin.on('error', () => undefined);
      try {
        const flags = (await admin.call('SENTINEL', 'MASTER', 'custos')) as string[];
        return flags[flags.indexOf('flags') + 1] === 'master';
      } catch {
        return false;
      } finally {
        admin.disconnect();
      }
    }, 20_000);
  }, 30_000);

  afterAll(async () => {
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

  const client = (caFile?: string) => {
    const c = new Redis(url, {
      ...verifierRedisOptions(url, {
        ...(caFile ? { REDIS_TLS_CA_FILE: caFile } : {}),
        REDIS_SENTINELS: [`127.0.0.1:${sentinelPort}`],
        REDIS_SENTINEL_MASTER: 'custos',
      }),
      retryStrategy: () => null,
      sentinelRetryStrategy: () => null,
    });
    c.on('error', () => undefined);
    clients.push(c);
    return c;
  };

  it('reads and writes the master over TLS, found through the sentinel over TLS, trusting the CA file', async () => {
    const c = client(file('ca.crt'));
    await c.set('custos:sentinel-tls:k', 'v');
    expect(await c.get('custos:sentinel-tls:k')).toBe('v');
    // In the URL's database, on the TLS master.
    const direct = new Redis({
      port: masterPort,
      host: '127.0.0.1',
      password: dataPassword,
      db: 2,
      tls: { ca: fs.readFileSync(file('ca.crt')) },
      lazyConnect: true,
      retryStrategy: () => null,
    });
    direct.on('error', () => undefined);
    clients.push(direct);
    expect(await direct.get('custos:sentinel-tls:k')).toBe('v');
  });

  it('refuses sentinels and master whose certificates another CA signed, or none it trusts (system CAs)', async () => {
    await expect(client(file('other-ca.crt')).ping()).rejects.toThrow();
    await expect(client().ping()).rejects.toThrow();
  });
});
