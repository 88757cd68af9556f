import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { freeMeshPort } from './ports';
import { ManagedProcess } from './process';

/** The redis-server binary: REDIS_SERVER_BIN, else from PATH. */
export function redisServerBinary(): string {
  return process.env.REDIS_SERVER_BIN || 'redis-server';
}

/** A mesh's redis-server, configured but not started. */
export interface MeshRedisConfig {
  /** `redis://:<password>@127.0.0.1:<port>`: what every service gets as REDIS_URL. */
  url: string;
  port: number;
  password: string;
  /** The generated config (mode 0600: it holds the password). */
  configFile: string;
  /** Arguments of redis-server to run it. */
  args: string[];
}

/** Where a mesh's redis-server runs. */
export interface MeshRedisOptions {
  /** Config file and working folder (nothing is persisted); made 0700 when missing. */
  dir: string;
  /** Default: a free port. */
  port?: number;
}

/**
 * Writes the config of an in-memory redis-server on 127.0.0.1:<port> that asks for a fresh random
 * password (`requirepass`), in a file only this user can read (not on the command line, where
 * any process listing would show it).
 */
export async function prepareMeshRedis(o: MeshRedisOptions): Promise<MeshRedisConfig> {
  fs.mkdirSync(o.dir, { recursive: true, mode: 0o700 });
  const port = o.port ?? (await freeMeshPort());
  const password = randomBytes(18).toString('base64url');
  const configFile = path.join(o.dir, 'redis.conf');
  const q = (v: string) => JSON.stringify(v);
  const config = [
    'bind 127.0.0.1',
    `port ${port}`,
    `requirepass ${q(password)}`,
    'save ""',
    'appendonly no',
    'daemonize no',
    `dir ${q(o.dir)}`,
    '',
  ].join('\n');
  fs.rmSync(configFile, { force: true });
  fs.writeFileSync(configFile, config, { mode: 0o600 });
  return { url: `redis://:${password}@127.0.0.1:${port}`, port, password, configFile, args: [configFile] };
}

/** True when a Redis on 127.0.0.1:<port> accepts `password` and answers PING. */
export function redisReadyAt(port: number, password: string, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let buf = '';
    const done = (v: boolean) => {
      socket.destroy();
      resolve(v);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => {
      const cmd = (...args: string[]) =>
        `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
      socket.write(cmd('AUTH', password) + cmd('PING'));
    });
    socket.on('data', (d) => {
      buf += d.toString('utf8');
      const lines = buf.split('\r\n');
      if (lines.length < 3) return;
      done(lines[0] === '+OK' && lines[1] === '+PONG');
    });
  });
}

/** A running mesh redis-server. */
export interface MeshRedis extends MeshRedisConfig {
  process: ManagedProcess;
  stop(graceMs?: number): Promise<void>;
}

/** Starts a private redis-server (prepareMeshRedis) and waits until it answers PING behind its password. */
export async function startMeshRedis(o: MeshRedisOptions & { timeoutMs?: number }): Promise<MeshRedis> {
  const conf = await prepareMeshRedis(o);
  const proc = new ManagedProcess({
    name: 'redis-server',
    command: redisServerBinary(),
    args: conf.args,
    env: { PATH: process.env.PATH ?? '' },
    cwd: o.dir,
  });
  const deadline = Date.now() + (o.timeoutMs ?? 15_000);
  let ready = false;
  while (!ready && proc.alive && Date.now() < deadline) {
    ready = await redisReadyAt(conf.port, conf.password, 500);
    if (!ready) await new Promise((r) => setTimeout(r, 100));
  }
  if (!ready || !proc.alive) {
    await proc.stop('SIGTERM', 2000);
    throw new Error(
      `redis-server did not start on 127.0.0.1:${conf.port} (${proc.describeExit()}):\n  ${proc.tail(8).join('\n  ')}`,
    );
  }
  return {
    ...conf,
    process: proc,
    async stop(graceMs = 10_000) {
      await proc.stop('SIGTERM', graceMs);
    },
  };
}
