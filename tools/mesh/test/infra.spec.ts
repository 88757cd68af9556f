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
    expect(infra.envOf('policy')).toEqual({ NATS_USER: 'policy', NATS_PASSWORD: users.policy!.password });
    expect(infra.envOf('gateway')).toEqual({});
    // The config holds the passwords: only this user may read it.
    expect(fs.statSync(path.join(dir, 'nats', 'nats-server.conf')).mode & 0o077).toBe(0);
  });

  it('runs Redis behind a password that the URL carries', async () => {
    const url = new URL(infra.redisUrl);
    expect(url.password).not.toBe('');
    const port = Number(url.port);
    expect(await redisReadyAt(port, decodeURIComponent(url.password))).toBe(true);
    expect(await redisReadyAt(port, 'wrong')).toBe(false);
    expect(fs.statSync(path.join(dir, 'redis', 'redis.conf')).mode & 0o077).toBe(0);
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
