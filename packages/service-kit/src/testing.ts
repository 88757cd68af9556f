import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

/** Connection URL of the Postgres server tests use (a superuser who may create databases). */
export function testPostgresUrl(database = 'postgres'): string {
  const base = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const url = new URL(base);
  url.pathname = `/${database}`;
  return url.toString();
}

/** Creates an empty database with a random name; `drop` removes it. Each test file gets its own. */
export async function createTestDatabase(
  prefix = 'custos_test',
  serverUrl: (database: string) => string = testPostgresUrl,
): Promise<{ url: string; name: string; drop: () => Promise<void> }> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl('postgres') });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return {
    name,
    url: serverUrl(name),
    drop: async () => {
      const c = new pg.Client({ connectionString: serverUrl('postgres') });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** Polls `check` until it returns a value other than undefined/false, or throws after `timeoutMs`. */
export async function waitFor<T>(
  check: () => Promise<T | undefined | false>,
  timeoutMs = 20000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms${lastError instanceof Error ? `: ${lastError.message}` : ''}`,
      );
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** A TCP port that was free a moment ago on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Path of the nats-server binary: NATS_SERVER_BIN, else /usr/sbin/nats-server, else from PATH. */
export function natsServerBinary(): string {
  if (process.env.NATS_SERVER_BIN) return process.env.NATS_SERVER_BIN;
  return fs.existsSync('/usr/sbin/nats-server') ? '/usr/sbin/nats-server' : 'nats-server';
}

/** A nats-server with JetStream owned by one test, on its own port and storage folder. */
export interface TestNatsServer {
  port: number;
  url: string;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Prepares (does not start) a private nats-server; the shared one on 4222 is never touched.
 * `config` renders a config file (e.g. with users and permissions) for the port and store folder;
 * without it the server runs with JetStream and no authorization.
 */
export async function testNatsServer(
  port?: number,
  config?: (where: { port: number; storeDir: string }) => string,
): Promise<TestNatsServer> {
  const p = port ?? (await freePort());
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-nats-'));
  const args = ['-js', '-a', '127.0.0.1', '-p', String(p), '-sd', dir];
  if (config) {
    const file = path.join(dir, 'nats-server.conf');
    fs.writeFileSync(file, config({ port: p, storeDir: path.join(dir, 'store') }), { mode: 0o600 });
    args.splice(0, args.length, '-c', file);
  }
  let child: ChildProcess | undefined;
  const reachable = () =>
    new Promise<boolean>((resolve) => {
      const s = net.connect(p, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
  return {
    port: p,
    url: `nats://127.0.0.1:${p}`,
    async start() {
      child = spawn(natsServerBinary(), args, {
        stdio: 'ignore',
      });
      await waitFor(reachable, 10000, 50);
    },
    async stop() {
      const c = child;
      child = undefined;
      if (!c || c.exitCode !== null) return;
      await new Promise<void>((resolve) => {
        c.once('exit', () => resolve());
        c.kill('SIGTERM');
      });
    },
  };
}
