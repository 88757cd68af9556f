import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  REDIS_SERVICE_NAMES,
  REDIS_TEST_USER,
  type RedisService,
  isRedisService,
  redisAclFile,
  redisUserOf,
} from '@custos/service-kit/redis-acl';
import { freeMeshPort } from './ports';
import { ManagedProcess } from './process';
import type { ServiceName } from './services';

/** The redis-server binary: REDIS_SERVER_BIN, else from PATH. */
export function redisServerBinary(): string {
  return process.env.REDIS_SERVER_BIN || 'redis-server';
}

/** A Redis ACL user name and password. */
export interface RedisLogin {
  user: string;
  password: string;
}

/**
 * How tests reach a mesh's own Redis (plain data, so it crosses to jest workers): each service's
 * REDIS_URL and the test user's.
 */
export interface MeshRedisAccess {
  /** The test user's URL: every right, for tests only, never given to a service. */
  testUrl: string;
  /** Each service's own REDIS_URL (its ACL user and password). */
  urls: Record<RedisService, string>;
}

/** A mesh's redis-server, configured but not started. */
export interface MeshRedisConfig extends MeshRedisAccess {
  port: number;
  /** Each service's ACL user (custos_<service>, the rights of @custos/service-kit redis-acl.ts). */
  users: Record<RedisService, RedisLogin>;
  /** Every right: for tests and the launcher's own readiness check. */
  testUser: RedisLogin;
  /** The generated config (mode 0600). */
  configFile: string;
  /** The generated ACL file (mode 0600: it holds the password hashes). */
  aclFile: string;
  /** Arguments of redis-server to run it. */
  args: string[];
  /** A service's REDIS_URL for serviceEnv; removed (undefined) for a service that does not use Redis. */
  envOf(service: ServiceName): Record<string, string | undefined>;
}

/** Where a mesh's redis-server runs. */
export interface MeshRedisOptions {
  /** Config file and working folder (nothing is persisted); made 0700 when missing. */
  dir: string;
  /** Default: a free port. */
  port?: number;
}

/** `redis://<user>:<password>@127.0.0.1:<port>` (passwords are base64url: nothing to escape). */
function loginUrl(login: RedisLogin, port: number): string {
  return `redis://${encodeURIComponent(login.user)}:${encodeURIComponent(login.password)}@127.0.0.1:${port}`;
}

/**
 * Writes the config of an in-memory redis-server on 127.0.0.1:<port> and its ACL file (mode
 * 0600): the `default` user off, one user per service that uses Redis with the rights of
 * @custos/service-kit (redisAclFile) and a fresh random password, and the test user. A connection
 * that does not sign in as one of them can do nothing.
 */
export async function prepareMeshRedis(o: MeshRedisOptions): Promise<MeshRedisConfig> {
  fs.mkdirSync(o.dir, { recursive: true, mode: 0o700 });
  const port = o.port ?? (await freeMeshPort());
  const password = () => randomBytes(18).toString('base64url');
  const users = Object.fromEntries(
    REDIS_SERVICE_NAMES.map((s) => [s, { user: redisUserOf(s), password: password() }]),
  ) as Record<RedisService, RedisLogin>;
  const testUser = { user: REDIS_TEST_USER, password: password() };
  const configFile = path.join(o.dir, 'redis.conf');
  const aclFile = path.join(o.dir, 'users.acl');
  const q = (v: string) => JSON.stringify(v);
  const config = [
    'bind 127.0.0.1',
    `port ${port}`,
    'save ""',
    'appendonly no',
    'daemonize no',
    `dir ${q(o.dir)}`,
    '',
  ];
  const passwords = Object.fromEntries(REDIS_SERVICE_NAMES.map((s) => [s, users[s].password])) as Record<
    RedisService,
    string
  >;
  for (const f of [configFile, aclFile]) fs.rmSync(f, { force: true });
  fs.writeFileSync(configFile, config.join('\n'), { mode: 0o600 });
  fs.writeFileSync(aclFile, redisAclFile({ passwords, testPassword: testUser.password }), { mode: 0o600 });
  const urls = Object.fromEntries(REDIS_SERVICE_NAMES.map((s) => [s, loginUrl(users[s], port)])) as Record<
    RedisService,
    string
  >;
  return {
    testUrl: loginUrl(testUser, port),
    urls,
    port,
    users,
    testUser,
    configFile,
    aclFile,
    args: [configFile, '--aclfile', aclFile],
    envOf: (service) => ({ REDIS_URL: isRedisService(service) ? urls[service] : undefined }),
  };
}

/** True when a Redis on 127.0.0.1:<port> lets `login` in and answers PING. */
export function redisReadyAt(port: number, login: RedisLogin, timeoutMs = 1000): Promise<boolean> {
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
      socket.write(cmd('AUTH', login.user, login.password) + cmd('PING'));
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
  /** The current server process (a new one after `start`). */
  readonly process: ManagedProcess;
  stop(graceMs?: number): Promise<void>;
  /** Starts it again after `stop`: same port, config and users, and empty (it keeps nothing). */
  start(timeoutMs?: number): Promise<void>;
}

/** Runs redis-server with `conf` and waits until it answers the test user's PING. */
async function runRedis(conf: MeshRedisConfig, dir: string, timeoutMs: number): Promise<ManagedProcess> {
  const proc = new ManagedProcess({
    name: 'redis-server',
    command: redisServerBinary(),
    args: conf.args,
    env: { PATH: process.env.PATH ?? '' },
    cwd: dir,
  });
  const deadline = Date.now() + timeoutMs;
  let ready = false;
  while (!ready && proc.alive && Date.now() < deadline) {
    ready = await redisReadyAt(conf.port, conf.testUser, 500);
    if (!ready) await new Promise((r) => setTimeout(r, 100));
  }
  if (!ready || !proc.alive) {
    await proc.stop('SIGTERM', 2000);
    throw new Error(
      `redis-server did not start on 127.0.0.1:${conf.port} (${proc.describeExit()}):\n  ${proc.tail(8).join('\n  ')}`,
    );
  }
  return proc;
}

/** Starts a private redis-server (prepareMeshRedis) and waits until it answers the test user's PING. */
export async function startMeshRedis(o: MeshRedisOptions & { timeoutMs?: number }): Promise<MeshRedis> {
  const conf = await prepareMeshRedis(o);
  let proc = await runRedis(conf, o.dir, o.timeoutMs ?? 15_000);
  return {
    ...conf,
    get process() {
      return proc;
    },
    async stop(graceMs = 10_000) {
      await proc.stop('SIGTERM', graceMs);
    },
    async start(timeoutMs = 15_000) {
      if (proc.alive) throw new Error('redis-server is still running');
      proc = await runRedis(conf, o.dir, timeoutMs);
    },
  };
}
