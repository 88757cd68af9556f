import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  NATS_SERVICE_NAMES,
  type NatsService,
  isNatsService,
  natsServerConfig,
  serviceNatsUsers,
} from '@custos/events/nats-permissions';
import { freeMeshPort } from './ports';
import { ManagedProcess } from './process';
import type { ServiceName } from './services';

/** A NATS user name and password. */
export interface NatsLogin {
  user: string;
  password: string;
}

/** The user with every right that tests may use (never given to a service). */
export const NATS_TEST_USER = 'custos_test';

/** The nats-server binary: NATS_SERVER_BIN, else Debian's /usr/sbin/nats-server, else from PATH. */
export function natsServerBinary(): string {
  if (process.env.NATS_SERVER_BIN) return process.env.NATS_SERVER_BIN;
  return fs.existsSync('/usr/sbin/nats-server') ? '/usr/sbin/nats-server' : 'nats-server';
}

/** A mesh's nats-server, configured but not started: its URL, config and who may log in. */
export interface MeshNatsConfig {
  url: string;
  port: number;
  /** The generated config (mode 0600: it holds the passwords). */
  configFile: string;
  /** Arguments of nats-server to run it. */
  args: string[];
  /** Each service's login (user name = service name). */
  users: Record<NatsService, NatsLogin>;
  /** Publish and subscribe anything: for tests that inspect or forge traffic. */
  testUser: NatsLogin;
  /** A service's NATS_USER and NATS_PASSWORD for serviceEnv (nothing for the gateway). */
  envOf(service: ServiceName): Record<string, string>;
}

/** Where and for which stream a mesh's nats-server runs. */
export interface MeshNatsOptions {
  /** Config and JetStream store (`-sd`); made 0700 when missing. */
  dir: string;
  /** Default: a free port. */
  port?: number;
  /** The stream and subject prefix the services' permissions name. */
  stream: string;
  prefix: string;
}

/**
 * Writes a nats-server config into `dir`: JetStream with its store in `dir`, 127.0.0.1:<port>,
 * and one user per service with the permissions of @custos/events (natsPermissions) and a fresh
 * random password, plus the test user. A connection without credentials is refused.
 */
export async function prepareMeshNats(o: MeshNatsOptions): Promise<MeshNatsConfig> {
  fs.mkdirSync(o.dir, { recursive: true, mode: 0o700 });
  const port = o.port ?? (await freeMeshPort());
  const password = () => randomBytes(18).toString('base64url');
  const users = Object.fromEntries(
    NATS_SERVICE_NAMES.map((s) => [s, { user: s, password: password() }]),
  ) as Record<NatsService, NatsLogin>;
  const testUser = { user: NATS_TEST_USER, password: password() };
  const passwords = Object.fromEntries(NATS_SERVICE_NAMES.map((s) => [s, users[s].password])) as Record<
    NatsService,
    string
  >;
  const configFile = path.join(o.dir, 'nats-server.conf');
  const config = natsServerConfig({
    host: '127.0.0.1',
    port,
    storeDir: o.dir,
    users: [...serviceNatsUsers({ prefix: o.prefix, stream: o.stream }, passwords), testUser],
  });
  fs.rmSync(configFile, { force: true });
  fs.writeFileSync(configFile, config, { mode: 0o600 });
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    configFile,
    args: ['-c', configFile],
    users,
    testUser,
    envOf: (service): Record<string, string> =>
      isNatsService(service)
        ? { NATS_USER: users[service].user, NATS_PASSWORD: users[service].password }
        : {},
  };
}

/** The INFO line a NATS server sends first, parsed; undefined when none comes. */
export function natsInfoAt(port: number, timeoutMs = 1000): Promise<Record<string, unknown> | undefined> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let buf = '';
    const done = (v: Record<string, unknown> | undefined) => {
      socket.destroy();
      resolve(v);
    };
    socket.setTimeout(timeoutMs, () => done(undefined));
    socket.on('error', () => done(undefined));
    socket.on('data', (d) => {
      buf += d.toString('utf8');
      const end = buf.indexOf('\r\n');
      if (end < 0) return;
      const line = buf.slice(0, end);
      try {
        done(line.startsWith('INFO ') ? (JSON.parse(line.slice(5)) as Record<string, unknown>) : undefined);
      } catch {
        done(undefined);
      }
    });
  });
}

/** A running mesh nats-server. */
export interface MeshNats extends MeshNatsConfig {
  /** The current server process (a new one after `start`). */
  readonly process: ManagedProcess;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
  /** Starts it again after `stop`: same port, config, users and JetStream store (fault tests). */
  start(timeoutMs?: number): Promise<void>;
}

/** Runs nats-server with `conf` and waits until it answers with JetStream and auth on. */
async function runNats(conf: MeshNatsConfig, dir: string, timeoutMs: number): Promise<ManagedProcess> {
  const proc = new ManagedProcess({
    name: 'nats-server',
    command: natsServerBinary(),
    args: conf.args,
    env: { PATH: process.env.PATH ?? '' },
    cwd: dir,
    logFile: path.join(dir, 'nats-server.log'),
  });
  const deadline = Date.now() + timeoutMs;
  let ready = false;
  while (!ready && proc.alive && Date.now() < deadline) {
    const info = await natsInfoAt(conf.port, 500);
    ready = info?.['jetstream'] === true && info['auth_required'] === true;
    if (!ready) await new Promise((r) => setTimeout(r, 100));
  }
  if (!ready || !proc.alive) {
    await proc.stop('SIGTERM', 2000);
    throw new Error(
      `nats-server did not start on 127.0.0.1:${conf.port} (${proc.describeExit()}):\n  ${proc.tail(8).join('\n  ')}`,
    );
  }
  return proc;
}

/**
 * Starts a private nats-server with the generated config (prepareMeshNats) and waits until it
 * answers with JetStream on; throws with its last lines when it does not within `timeoutMs`.
 * Its output goes to `<dir>/nats-server.log`.
 */
export async function startMeshNats(o: MeshNatsOptions & { timeoutMs?: number }): Promise<MeshNats> {
  const conf = await prepareMeshNats(o);
  let proc = await runNats(conf, o.dir, o.timeoutMs ?? 15_000);
  return {
    ...conf,
    get process() {
      return proc;
    },
    async stop(graceMs = 10_000) {
      await proc.stop('SIGTERM', graceMs);
    },
    async start(timeoutMs = 15_000) {
      if (proc.alive) throw new Error('nats-server is still running');
      proc = await runNats(conf, o.dir, timeoutMs);
    },
  };
}
