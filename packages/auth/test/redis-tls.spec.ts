import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { redisTlsOptions } from '@custos/service-kit';
import { freePort, waitFor } from '@custos/service-kit/testing';
import { Redis } from 'ioredis';

// A real redis-server speaking TLS only, with a certificate from a private CA and a password: what
// a `rediss://` REDIS_URL with REDIS_TLS_CA_FILE points at. The services build their clients with
// the same options (redisTlsOptions).
describe('Redis over TLS with a private CA (rediss:// and REDIS_TLS_CA_FILE)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-redis-tls-'));
  const file = (name: string) => path.join(dir, name);
  const password = 'tls-test-password';
  let port: number;
  let server: ChildProcess;
  const clients: Redis[] = [];

  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });

  beforeAll(async () => {
    // A throwaway CA and a server certificate for 127.0.0.1 signed by it.
    openssl(
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=custos test redis CA',
      '-keyout',
      file('ca.key'),
      '-out',
      file('ca.crt'),
    );
    openssl(
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-subj',
      '/CN=127.0.0.1',
      '-keyout',
      file('server.key'),
      '-out',
      file('server.csr'),
    );
    fs.writeFileSync(file('san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
    openssl(
      'x509',
      '-req',
      '-in',
      file('server.csr'),
      '-CA',
      file('ca.crt'),
      '-CAkey',
      file('ca.key'),
      '-CAcreateserial',
      '-days',
      '1',
      '-extfile',
      file('san.ext'),
      '-out',
      file('server.crt'),
    );
    port = await freePort();
    server = spawn(
      process.env.REDIS_SERVER_BIN || 'redis-server',
      [
        '--port',
        '0',
        '--tls-port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--tls-cert-file',
        file('server.crt'),
        '--tls-key-file',
        file('server.key'),
        '--tls-ca-cert-file',
        file('ca.crt'),
        '--tls-auth-clients',
        'no',
        '--requirepass',
        password,
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
      ],
      { stdio: 'ignore' },
    );
    await waitFor(async () => {
      const r = client(`rediss://:${password}@127.0.0.1:${port}`, file('ca.crt'));
      return (await r.ping()) === 'PONG';
    }, 10_000);
  });

  afterAll(async () => {
    // Clients refused at connect have ended already; ending them again leaves a timer behind.
    await Promise.all(clients.filter((c) => c.status === 'ready').map((c) => c.quit()));
    await new Promise<void>((resolve) => {
      if (!server || server.exitCode !== null) return resolve();
      server.once('exit', () => resolve());
      server.kill('SIGTERM');
    });
    fs.rmSync(dir, { recursive: true, force: true });
  });

  function client(url: string, caFile?: string): Redis {
    const c = new Redis(url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      ...redisTlsOptions(url, caFile),
    });
    c.on('error', () => undefined);
    clients.push(c);
    return c;
  }

  it('connects and authenticates with the CA file', async () => {
    const c = client(`rediss://:${password}@127.0.0.1:${port}`, file('ca.crt'));
    await c.set('k', 'v');
    expect(await c.get('k')).toBe('v');
  });

  it('refuses a server its CA did not vouch for (no CA file: the system CAs)', async () => {
    const c = client(`rediss://:${password}@127.0.0.1:${port}`);
    await expect(c.ping()).rejects.toThrow();
  });

  it('refuses a wrong password', async () => {
    const c = client(`rediss://:wrong@127.0.0.1:${port}`, file('ca.crt'));
    await expect(c.ping()).rejects.toThrow(/WRONGPASS|NOAUTH|invalid/i);
  });
});
