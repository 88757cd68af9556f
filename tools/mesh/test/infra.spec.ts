import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { type MeshInfra, startMeshInfra } from '../src/mesh-infra';
import { redisReadyAt } from '../src/redis-server';

/** What a NATS server answers to CONNECT with these credentials (`+OK` or the -ERR line). */
function natsConnect(port: number, login?: { user: string; password: string }): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let buf = '';
    socket.setTimeout(3000, () => reject(new Error('no answer')));
    socket.on('error', reject);
    socket.on('data', (d) => {
      buf += d.toString('utf8');
      const lines = buf.split('\r\n').filter(Boolean);
      if (lines.length === 1 && lines[0]!.startsWith('INFO ')) {
        const auth = login ? { user: login.user, pass: login.password } : {};
        socket.write(`CONNECT ${JSON.stringify({ verbose: true, ...auth })}\r\nPING\r\n`);
        return;
      }
      const answer = lines.slice(1).find((l) => l === '+OK' || l.startsWith('-ERR'));
      if (answer) {
        socket.destroy();
        resolve(answer);
      }
    });
  });
}

describe('startMeshInfra: the mesh’s own nats-server and redis-server', () => {
  let infra: MeshInfra;
  let dir: string;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-mesh-infra-test-'));
    infra = await startMeshInfra({ dir, stream: 'INFRA_TEST', prefix: 'infra.test' });
  });
  afterAll(async () => {
    await infra?.stop(5000);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('lets each service and the test user in with their own passwords, and nobody else', async () => {
    const port = Number(new URL(infra.natsUrl).port);
    const users = infra.nats!.users;
    expect(await natsConnect(port, users['vault-crypto'])).toBe('+OK');
    expect(await natsConnect(port, infra.nats!.testUser)).toBe('+OK');
    expect(await natsConnect(port)).toMatch(/Authorization Violation/);
    expect(
      await natsConnect(port, { user: 'vault-crypto', password: users['webhook-dispatcher']!.password }),
    ).toMatch(/Authorization Violation/);
    // Services get their own login; the gateway does not use NATS and gets none.
    expect(infra.envOf('policy')).toMatchObject({
      NATS_USER: 'policy',
      NATS_PASSWORD: users.policy!.password,
    });
    expect(infra.envOf('gateway')).not.toHaveProperty('NATS_USER');
    expect(infra.envOf('gateway')).not.toHaveProperty('NATS_PASSWORD');
    // The config holds the passwords: only this user may read it.
    expect(fs.statSync(path.join(dir, 'nats', 'nats-server.conf')).mode & 0o077).toBe(0);
  });

  it('runs Redis with an ACL user per service, the default user off, each service its own URL', async () => {
    const redis = infra.redis!;
    const port = Number(new URL(infra.redisUrl).port);
    const loginOf = (url: string) => {
      const u = new URL(url);
      return { user: decodeURIComponent(u.username), password: decodeURIComponent(u.password) };
    };
    // The mesh-wide URL is the test user's; each service signs in as its own user.
    expect(loginOf(infra.redisUrl).user).toBe('custos_test');
    expect(await redisReadyAt(port, loginOf(redis.testUrl))).toBe(true);
    const gateway = loginOf(redis.urls.gateway);
    expect(gateway.user).toBe('custos_gateway');
    expect(await redisReadyAt(port, { user: 'custos_webhook_dispatcher', password: 'wrong' })).toBe(false);
    // Another service's password does not open this one.
    expect(await redisReadyAt(port, { user: 'custos_webhook_dispatcher', password: gateway.password })).toBe(
      false,
    );
    // The default user (AUTH <password> with requirepass, or no AUTH at all) is off.
    expect(await redisReadyAt(port, { user: 'default', password: '' })).toBe(false);
    expect(infra.envOf('webhook-dispatcher')).toMatchObject({ REDIS_URL: redis.urls['webhook-dispatcher'] });
    expect(loginOf(infra.envOf('identity')['REDIS_URL']!).user).toBe('custos_identity');
    expect(loginOf(infra.envOf('signer')['REDIS_URL']!).user).toBe('custos_signer');
    // approvals reads token revocations as its own user too.
    expect(loginOf(infra.envOf('approvals')['REDIS_URL']!).user).toBe('custos_approvals');
    const urls = Object.values(redis.urls);
    expect(new Set(urls).size).toBe(urls.length);
    expect(urls).not.toContain(redis.testUrl);
    // Config and ACL file: only this user may read them.
    for (const f of ['redis.conf', 'users.acl'])
      expect(fs.statSync(path.join(dir, 'redis', f)).mode & 0o077).toBe(0);
    // The ACL file holds hashes, never the passwords.
    const acl = fs.readFileSync(path.join(dir, 'redis', 'users.acl'), 'utf8');
    expect(acl).not.toContain(gateway.password);
    expect(acl).toMatch(/^user default reset off$/m);
  });

  it('stops both servers', async () => {
    const natsPort = Number(new URL(infra.natsUrl).port);
    const redisPort = Number(new URL(infra.redisUrl).port);
    await infra.stop(5000);
    const open = (port: number) =>
      new Promise<boolean>((resolve) => {
        const s = net.connect(port, '127.0.0.1');
        s.once('connect', () => {
          s.destroy();
          resolve(true);
        });
        s.once('error', () => resolve(false));
      });
    expect(await open(natsPort)).toBe(false);
    expect(await open(redisPort)).toBe(false);
  });
});
