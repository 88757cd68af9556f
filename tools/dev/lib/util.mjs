// Small helpers of the dev launcher: settings, screen output, probes, binaries, pid files.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Repository root (tools/dev/lib -> ../../..). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** A failure with a message meant for the person at the terminal (no stack trace). */
export class DevError extends Error {}

function intFrom(env, name, fallback) {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 65535) throw new DevError(`${name}=${raw} is not a port number`);
  return n;
}

/** Everything the launcher reads from its environment, resolved once. */
export function devSettings(env = process.env) {
  const dataDir = path.resolve(env.CUSTOS_DEV_DIR || path.join(ROOT, '.custos-dev'));
  return {
    root: ROOT,
    dataDir,
    pgDir: path.join(dataDir, 'pg'),
    pgPasswordFile: path.join(dataDir, 'pg-password'),
    natsDir: path.join(dataDir, 'nats'),
    redisDir: path.join(dataDir, 'redis'),
    logDir: path.join(dataDir, 'logs'),
    runDir: path.join(dataDir, 'run'),
    mailDir: path.join(dataDir, 'outbox', 'mail'),
    masterKeyFile: path.join(dataDir, 'master.key'),
    databaseUrl: env.DATABASE_URL || undefined,
    natsUrl: env.NATS_URL || undefined,
    redisUrl: env.REDIS_URL || undefined,
    pgPort: intFrom(env, 'CUSTOS_DEV_PG_PORT', 54329),
    // Own stream and subjects, so dev mode on a shared NATS never collides with the test streams.
    natsStream: env.NATS_STREAM || 'CUSTOS_DEV',
    natsSubjectPrefix: env.NATS_SUBJECT_PREFIX || 'custos.dev.events',
    natsPort: intFrom(env, 'CUSTOS_DEV_NATS_PORT', 4223),
    redisPort: intFrom(env, 'CUSTOS_DEV_REDIS_PORT', 6380),
    anvilPort: intFrom(env, 'CUSTOS_DEV_ANVIL_PORT', 8545),
    httpPort: intFrom(env, 'PORT', 8080),
    healthTimeoutMs: 60_000,
  };
}

/** Creates the data folder and the folders every run needs (pg, nats, redis come when used). */
export function makeDataDirs(s) {
  for (const d of [s.dataDir, s.logDir, s.runDir, s.mailDir]) {
    fs.mkdirSync(d, { recursive: true });
  }
  // Ignored by git wherever it lives (the root .gitignore also lists .custos-dev/): it holds keys.
  const ignore = path.join(s.dataDir, '.gitignore');
  if (!fs.existsSync(ignore))
    fs.writeFileSync(ignore, '# Custos dev data (keys, database): never commit\n*\n');
}

// ---------------------------------------------------------------------------------------------
// screen output

const useColor = process.env.FORCE_COLOR
  ? process.env.FORCE_COLOR !== '0'
  : Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
const PALETTE = [36, 32, 33, 34, 35, 96, 92, 93, 95];

/** Wraps text in an ANSI color when stdout is a terminal. */
export function paint(code, text) {
  return useColor ? `\x1b[${code}m${text}\x1b[0m` : text;
}

/** Color code of a service's prefix. */
export function colorOf(index) {
  return PALETTE[index % PALETTE.length];
}

// Wide enough for the longest service name (webhook-dispatcher).
const PREFIX_WIDTH = 18;

/** A line prefix like `identity          | ` in the given color. */
export function prefix(name, color) {
  return paint(color, `${name.padEnd(PREFIX_WIDTH)} |`) + ' ';
}

// A closed stdout (`pnpm dev | head`, a killed `tee`) must not take the launcher down before it
// has stopped what it started.
process.stdout.on('error', () => undefined);
process.stderr.on('error', () => undefined);

function write(stream, text) {
  try {
    stream.write(text);
  } catch {
    // stdout closed (e.g. piped into `head`): keep running, the log files still get everything
  }
}

/** A launcher message. */
export function say(msg) {
  write(process.stdout, `${prefix('dev', 1)}${msg}\n`);
}

/** A launcher warning or failure that must not be missed. */
export function shout(msg) {
  const bar = '!'.repeat(72);
  write(process.stderr, `${paint('1;31', bar)}\n${paint('1;31', `!! ${msg}`)}\n${paint('1;31', bar)}\n`);
}

/** A URL fit to print: its password, if it has one, replaced by `***`. */
export function maskUrl(url) {
  try {
    const u = new URL(url);
    if (!u.password) return url;
    u.password = '***';
    return u.toString();
  } catch {
    return url.replace(/\/\/([^:/@]*):[^@/]*@/, '//$1:***@');
  }
}

/** Writes a line to the launcher's stdout with the given prefix. */
export function printPrefixed(pfx, line) {
  write(process.stdout, `${pfx}${line}\n`);
}

// ---------------------------------------------------------------------------------------------
// time and probes

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it returns a truthy value; returns it, or undefined after `timeoutMs`. */
export async function pollUntil(check, timeoutMs, intervalMs = 200) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() >= deadline) return undefined;
    await sleep(intervalMs);
  }
}

/**
 * Connects to host:port, optionally sends `send`, and resolves to the first line received
 * ('' when the peer said nothing), or null when nothing accepts the connection.
 */
export function probeLine(port, { host = '127.0.0.1', send, timeoutMs = 1500 } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host });
    let connected = false;
    let data = '';
    let done = false;
    const finish = (v) => {
      if (done) return;
      done = true;
      sock.destroy();
      resolve(v);
    };
    sock.setTimeout(timeoutMs, () => finish(connected ? data : null));
    sock.on('connect', () => {
      connected = true;
      if (send) sock.write(send);
    });
    sock.on('data', (d) => {
      data += d.toString('utf8');
      const i = data.indexOf('\n');
      if (i >= 0) finish(data.slice(0, i).replace(/\r$/, ''));
    });
    sock.on('error', () => finish(connected ? data : null));
    sock.on('close', () => finish(connected ? data : null));
  });
}

/** The JSON of a NATS `INFO {...}` greeting, or null when the line is not one. */
export function parseNatsInfo(line) {
  if (typeof line !== 'string' || !line.startsWith('INFO ')) return null;
  try {
    return JSON.parse(line.slice(5));
  } catch {
    return null;
  }
}

/** True when a JetStream-enabled NATS server answers on 127.0.0.1:port. */
export async function natsJetStreamAt(port) {
  return parseNatsInfo(await probeLine(port))?.jetstream === true;
}

// ---------------------------------------------------------------------------------------------
// binaries and packages

function isExecutable(p) {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

/** Path of an executable from PATH or the usual system folders, or null. */
export function findBinary(name) {
  const dirs = [
    ...(process.env.PATH || '').split(path.delimiter),
    '/usr/sbin',
    '/usr/bin',
    '/usr/local/bin',
    '/usr/local/sbin',
    '/opt/homebrew/bin',
  ];
  for (const dir of dirs) {
    if (!dir) continue;
    const p = path.join(dir, name);
    if (isExecutable(p)) return p;
  }
  return null;
}

export const isRoot = () => typeof process.getuid === 'function' && process.getuid() === 0;
const isDebian = () => fs.existsSync('/etc/debian_version') && findBinary('apt-get') !== null;

let aptUpdated = false;

/** Runs a command; resolves to its exit code (output appended to logFile). */
export function runLogged(cmd, args, logFile, extraEnv = {}) {
  return new Promise((resolve) => {
    const fd = fs.openSync(logFile, 'a');
    const child = spawn(cmd, args, { stdio: ['ignore', fd, fd], env: { ...process.env, ...extraEnv } });
    child.on('error', () => resolve(127));
    child.on('exit', (code) => resolve(code ?? 1));
    fs.closeSync(fd);
  });
}

/**
 * Finds `binary`; when missing and this is root on Debian, installs `pkg` with apt-get (saying so),
 * otherwise throws a DevError that tells the person what to do (`hint`).
 */
export async function ensureBinary(binary, pkg, logDir, hint) {
  let found = findBinary(binary);
  if (found) return found;
  if (!isRoot() || !isDebian()) {
    throw new DevError(`${binary} was not found on this machine. ${hint}`);
  }
  const log = path.join(logDir, 'apt.log');
  say(`${binary} not found: installing the Debian package ${pkg} with apt-get (output in ${log}) ...`);
  const env = { DEBIAN_FRONTEND: 'noninteractive' };
  if (!aptUpdated) {
    if ((await runLogged('apt-get', ['update', '-q'], log, env)) !== 0)
      throw new DevError(`apt-get update failed (see ${log}). ${hint}`);
    aptUpdated = true;
  }
  if ((await runLogged('apt-get', ['install', '-y', '-q', pkg], log, env)) !== 0) {
    throw new DevError(`apt-get install ${pkg} failed (see ${log}). ${hint}`);
  }
  found = findBinary(binary);
  if (!found) throw new DevError(`${binary} is still missing after installing ${pkg}. ${hint}`);
  say(`installed ${pkg}: ${found}`);
  return found;
}

// ---------------------------------------------------------------------------------------------
// processes left behind by an earlier launcher that died without cleaning up

/** The command line of a live process, or null. */
export function commandOf(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    const r = spawnSync('ps', ['-o', 'command=', '-p', String(pid)], { encoding: 'utf8' });
    return r.status === 0 && r.stdout.trim() ? r.stdout.trim() : null;
  }
}

export function isAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

/** Writes `<runDir>/<name>.pid`. */
export function writePidFile(runDir, name, pid) {
  fs.writeFileSync(path.join(runDir, `${name}.pid`), `${pid}\n`);
}

export function removePidFile(runDir, name) {
  fs.rmSync(path.join(runDir, `${name}.pid`), { force: true });
}

/**
 * If `<runDir>/<name>.pid` names a live process whose command line contains `marker`, it is a
 * leftover of an earlier launcher: stop it (signal, then SIGKILL after `graceMs`).
 */
export async function reclaimLeftover(runDir, name, marker, { signal = 'SIGTERM', graceMs = 10_000 } = {}) {
  const file = path.join(runDir, `${name}.pid`);
  let pid;
  try {
    pid = Number.parseInt(fs.readFileSync(file, 'utf8').trim(), 10);
  } catch {
    return;
  }
  const cmd = Number.isInteger(pid) && pid > 1 && isAlive(pid) ? commandOf(pid) : null;
  if (cmd && cmd.includes(marker)) {
    say(`stopping ${name} (pid ${pid}) left running by an earlier launcher`);
    await stopPid(pid, signal, graceMs);
  }
  fs.rmSync(file, { force: true });
}

/** Sends `signal` to pid (and its process group when it leads one), SIGKILL after graceMs. */
export async function stopPid(pid, signal, graceMs) {
  const send = (sig) => {
    try {
      process.kill(-pid, sig);
    } catch {
      try {
        process.kill(pid, sig);
      } catch {
        // already gone
      }
    }
  };
  send(signal);
  if (await pollUntil(() => !isAlive(pid), graceMs, 100)) return;
  send('SIGKILL');
  await pollUntil(() => !isAlive(pid), 3000, 100);
}
