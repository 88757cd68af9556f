#!/usr/bin/env node
// Custos dev mode (`pnpm dev`): Postgres, NATS and Redis (from the environment, already running, or
// started here), then the nine services on loopback, each its own process; waits for the gateway's
// /v1/health and prints where to go. Ctrl-C stops everything it started. See README.md beside it.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ManagedChild, reportUnexpectedExit, stopAll } from './lib/children.mjs';
import { resolveNats, resolvePostgres, resolveRedis } from './lib/infra.mjs';
import { devMasterKey } from './lib/master-key.mjs';
import {
  DevError,
  ROOT,
  SERVICE_NAMES,
  colorOf,
  devSettings,
  findBinary,
  makeDataDirs,
  paint,
  probeLine,
  reclaimLeftover,
  say,
  shout,
  sleep,
} from './lib/util.mjs';

const USAGE = `usage: node tools/dev/launch.mjs [--infra-only]

Starts Custos in dev mode: Postgres, NATS and Redis, then the nine services on 127.0.0.1.
  --infra-only   start only Postgres/NATS/Redis and print their URLs (to run services by hand)
Variables: DATABASE_URL, NATS_URL, REDIS_URL, PORT, LOG_LEVEL, CUSTOS_DEV_DIR, CUSTOS_DEV_PG_PORT,
CUSTOS_DEV_NATS_PORT, CUSTOS_DEV_REDIS_PORT, NATS_STREAM, NATS_SUBJECT_PREFIX (tools/dev/README.md).`;

/** Name, ports, address variable and entry point of each service. */
export function serviceTable() {
  return SERVICE_NAMES.map((name, i) => ({
    name,
    color: colorOf(i),
    grpcPort: 50050 + i,
    metricsPort: 9460 + i,
    addrVar: `${name.toUpperCase().replace(/-/g, '_')}_ADDR`,
    main: path.join('services', name, 'dist', 'main.js'),
  }));
}

/** Returns a function giving each service its environment: the caller's, plus the dev settings. */
export function serviceEnvFor(s, infra, services, env = process.env) {
  const common = {
    LOG_LEVEL: env.LOG_LEVEL || 'info',
    GRPC_HOST: '127.0.0.1',
    METRICS_HOST: '127.0.0.1',
    DATABASE_URL: infra.postgres.url,
    MIGRATE_ON_START: 'true',
    NATS_URL: infra.nats.url,
    // Own stream and subjects, so dev mode on a shared NATS never collides with the test streams.
    NATS_STREAM: env.NATS_STREAM || 'CUSTOS_DEV',
    NATS_SUBJECT_PREFIX: env.NATS_SUBJECT_PREFIX || 'custos.dev.events',
    REDIS_URL: infra.redis.url,
    HOST: '127.0.0.1',
    PORT: String(s.httpPort),
    KMS_PROVIDER: env.KMS_PROVIDER || 'local',
    LOCAL_KMS_MASTER_KEY: infra.masterKey,
    TOKEN_SIGNING_KEK: infra.signingKek,
    AUDIT_HMAC_KEY: infra.auditKey,
    WEBHOOK_SECRET_KEY: infra.webhookKey,
    // Dev mode may deliver to a receiver on this machine over plain HTTP; production may not.
    WEBHOOK_ALLOW_HTTP: env.WEBHOOK_ALLOW_HTTP || 'true',
    WEBHOOK_ALLOWED_CIDRS: env.WEBHOOK_ALLOWED_CIDRS || '127.0.0.1/32,::1/128',
    MAIL_DIR: s.mailDir,
  };
  for (const svc of services) common[svc.addrVar] = `127.0.0.1:${svc.grpcPort}`;
  return (svc) => ({
    ...env,
    ...common,
    GRPC_PORT: String(svc.grpcPort),
    METRICS_PORT: String(svc.metricsPort),
  });
}

// ---------------------------------------------------------------------------------------------
// build

function pnpmCommand() {
  const execPath = process.env.npm_execpath;
  if (execPath && /pnpm/.test(path.basename(execPath))) {
    return /\.[cm]?js$/.test(execPath) ? [process.execPath, [execPath]] : [execPath, []];
  }
  const pnpm = findBinary('pnpm');
  if (pnpm) return [pnpm, []];
  const corepack = findBinary('corepack');
  if (corepack) return [corepack, ['pnpm']];
  return null;
}

/** Runs `pnpm turbo run build` when a service has no dist/main.js yet. */
async function ensureBuilt(services) {
  const missing = services.filter((svc) => !fs.existsSync(path.join(ROOT, svc.main)));
  if (missing.length === 0) return;
  const cmd = pnpmCommand();
  if (!cmd)
    throw new DevError(
      'pnpm is needed to build the services: `npm install -g pnpm@10` (or `corepack enable`), then `pnpm install`',
    );
  const first = missing.find((m) => m.name === 'gateway') ?? missing[0];
  say(
    `${first.main}${missing.length > 1 ? ` (and ${missing.length - 1} more)` : ''} missing: building first with \`pnpm turbo run build\``,
  );
  const code = await new Promise((resolve) => {
    const child = spawn(cmd[0], [...cmd[1], 'turbo', 'run', 'build'], { cwd: ROOT, stdio: 'inherit' });
    child.on('error', () => resolve(127));
    child.on('exit', (c) => resolve(c ?? 1));
  });
  if (code !== 0)
    throw new DevError(
      `\`pnpm turbo run build\` failed (exit ${code}); fix the build and run pnpm dev again`,
    );
}

// ---------------------------------------------------------------------------------------------
// health

const OK_WORDS = new Set(['ok', 'serving', 'up', 'healthy', 'pass']);

function isOk(v) {
  if (v === true) return true;
  if (typeof v === 'string') return OK_WORDS.has(v.toLowerCase());
  if (v && typeof v === 'object') return isOk(v.status ?? v.state ?? v.ok);
  return false;
}

function statusText(v) {
  if (v && typeof v === 'object') return String(v.status ?? v.state ?? JSON.stringify(v));
  return String(v);
}

/** "name: STATUS" for each dependency a health body reports as not serving, or null if it lists none. */
export function notServingFrom(body) {
  if (!body || typeof body !== 'object') return null;
  for (const key of ['services', 'checks', 'components', 'dependencies']) {
    const v = body[key];
    if (Array.isArray(v)) {
      return v.filter((x) => !isOk(x)).map((x) => `${x?.name ?? x?.service ?? '?'}: ${statusText(x)}`);
    }
    if (v && typeof v === 'object') {
      return Object.entries(v)
        .filter(([, x]) => !isOk(x))
        .map(([k, x]) => `${k}: ${statusText(x)}`);
    }
  }
  return null;
}

async function checkHealth(url) {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    const text = await res.text();
    let body;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    return { ok: res.status === 200 && body?.status === 'ok', status: res.status, body, text };
  } catch (err) {
    return { ok: false, error: err?.cause?.code ?? err?.name ?? String(err) };
  }
}

function reportUnhealthy(url, last, state, timeoutMs) {
  const lines = [];
  if (last?.error) lines.push(`GET ${url}: ${last.error} (the gateway is not answering)`);
  else if (last) {
    lines.push(`GET ${url}: HTTP ${last.status}`);
    const bad = notServingFrom(last.body);
    if (bad && bad.length > 0) lines.push(`not serving: ${bad.join(', ')}`);
    else if (!bad) lines.push(`body: ${String(last.text).slice(0, 400)}`);
  }
  const dead = state.children.filter((c) => !c.alive);
  if (dead.length > 0) lines.push(`exited: ${dead.map((c) => `${c.name} (${c.describeExit()})`).join(', ')}`);
  shout(`Custos is not healthy after ${timeoutMs / 1000} s.\n!! ${lines.join('\n!! ')}`);
  say(`still running; logs in ${state.settings.logDir}. Will say so when /v1/health reports ok.`);
}

function printReady(s, state) {
  const url = `http://127.0.0.1:${s.httpPort}`;
  const rows = [
    ['gateway', url],
    ['mail', s.mailDir],
    ['logs', s.logDir],
    ['postgres', state.infraByName.postgres.url],
    ['nats', state.infraByName.nats.url],
    ['redis', state.infraByName.redis.url],
  ];
  console.log('');
  console.log(paint('1;32', `Custos dev is ready: ${url}`));
  for (const [k, v] of rows) console.log(`  ${k.padEnd(9)} ${v}`);
  console.log(`  Ctrl-C stops everything.\n`);
}

async function waitForHealth(s, state) {
  const url = `http://127.0.0.1:${s.httpPort}/v1/health`;
  const deadline = Date.now() + s.healthTimeoutMs;
  let warned = false;
  let last;
  while (!state.stopping && !state.stopRequested) {
    const r = await checkHealth(url);
    if (state.stopping || state.stopRequested) return;
    if (r.ok) {
      printReady(s, state);
      return;
    }
    last = r;
    if (!warned && Date.now() >= deadline) {
      warned = true;
      reportUnhealthy(url, last, state, s.healthTimeoutMs);
    }
    await sleep(warned ? 2000 : 500);
  }
}

// ---------------------------------------------------------------------------------------------
// start and stop

class StopRequested extends Error {}

async function startServices(s, state, services) {
  const envOf = serviceEnvFor(s, state.infraByName, services);
  const busy = [];
  for (const [what, port] of [
    ['HTTP', s.httpPort],
    ...services.flatMap((x) => [
      [`${x.name} gRPC`, x.grpcPort],
      [`${x.name} metrics`, x.metricsPort],
    ]),
  ]) {
    if ((await probeLine(port, { timeoutMs: 500 })) !== null) busy.push(`${port} (${what})`);
  }
  if (busy.length > 0)
    shout(`ports already in use on 127.0.0.1, those services will fail to start: ${busy.join(', ')}`);
  for (const svc of services) {
    if (!fs.existsSync(path.join(ROOT, svc.main))) {
      shout(`${svc.main} does not exist even after the build: ${svc.name} is not started`);
      continue;
    }
    state.children.push(
      new ManagedChild({
        name: svc.name,
        command: process.execPath,
        args: [svc.main],
        env: envOf(svc),
        cwd: ROOT,
        logDir: s.logDir,
        runDir: s.runDir,
        color: svc.color,
        onUnexpectedExit: (c) => reportUnexpectedExit(c),
      }),
    );
  }
  say(
    `started ${state.children.length} services; waiting for http://127.0.0.1:${s.httpPort}/v1/health (up to ${s.healthTimeoutMs / 1000} s)`,
  );
}

/** Stops services (SIGTERM, SIGKILL after 10 s), then what the launcher started, in reverse. */
async function stopEverything(state) {
  state.stopping = true;
  const live = state.children.filter((c) => c.alive);
  if (live.length > 0) say(`stopping ${live.length} services ...`);
  await stopAll(state.children, 10_000);
  for (const infra of [...state.infra].reverse()) {
    if (!infra.stop) continue;
    say(`stopping ${infra.name} ...`);
    await infra.stop().catch((err) => shout(`stopping ${infra.name} failed: ${err.message}`));
  }
}

/** Synchronous last resort when the process exits without stopEverything having finished. */
function abandonAll(state) {
  for (const c of state.children) c.signal('SIGTERM');
  for (const infra of state.infra) infra.abandon?.();
}

function installSignalHandlers(state, onStop) {
  const handler = (sig) => {
    state.signals += 1;
    if (state.signals === 1) {
      say(`${sig}: stopping`);
      onStop(sig);
    } else if (state.signals === 2) {
      say(`${sig} again: killing the services now (once more exits at once)`);
      for (const c of state.children) c.signal('SIGKILL');
    } else {
      abandonAll(state);
      process.exit(130);
    }
  };
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => handler(sig));
}

/** Runs dev mode; resolves to the process exit code. */
export async function main(argv = process.argv.slice(2)) {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(USAGE);
    return 0;
  }
  const unknown = argv.filter((a) => a !== '--infra-only');
  if (unknown.length > 0) {
    console.error(`unknown argument ${unknown[0]}\n${USAGE}`);
    return 2;
  }
  const infraOnly = argv.includes('--infra-only');
  const state = {
    settings: undefined,
    stopping: false,
    stopRequested: false,
    signals: 0,
    children: [],
    infra: [],
    infraByName: {},
  };
  let running = false; // past start-up: a signal stops at once
  let resolveStopped;
  const stopped = new Promise((r) => (resolveStopped = r));
  installSignalHandlers(state, () => {
    if (running) resolveStopped();
    else state.stopRequested = true; // start-up stops at its next step
  });
  process.on('exit', () => {
    if (!state.stopped) abandonAll(state);
  });
  const checkpoint = () => {
    if (state.stopRequested) throw new StopRequested();
  };

  let exitCode = 0;
  try {
    const s = devSettings();
    state.settings = s;
    makeDataDirs(s);
    say(`data folder ${s.dataDir}`);
    const services = serviceTable();
    const masterKey = devMasterKey(s.masterKeyFile);
    say(`dev master key ${masterKey.how}`);
    if (!infraOnly) await ensureBuilt(services);
    // Services of an earlier launcher that died without stopping them: before their database goes.
    for (const svc of services) await reclaimLeftover(s.runDir, svc.name, svc.main);
    checkpoint();
    for (const [name, resolve] of [
      ['postgres', resolvePostgres],
      ['nats', resolveNats],
      ['redis', resolveRedis],
    ]) {
      const infra = { name, ...(await resolve(s)) };
      state.infra.push(infra);
      state.infraByName[name] = infra;
      say(`${name.padEnd(8)} ${infra.how}`);
      checkpoint();
    }
    state.infraByName.masterKey = masterKey.key;
    const signingKek = devMasterKey(
      path.join(s.dataDir, 'token-signing.kek'),
      process.env,
      'TOKEN_SIGNING_KEK',
    );
    say(`dev token-signing KEK ${signingKek.how}`);
    state.infraByName.signingKek = signingKek.key;
    const auditKey = devMasterKey(path.join(s.dataDir, 'audit-hmac.key'), process.env, 'AUDIT_HMAC_KEY');
    say(`dev audit HMAC key ${auditKey.how}`);
    state.infraByName.auditKey = auditKey.key;
    const webhookKey = devMasterKey(
      path.join(s.dataDir, 'webhook-secret.key'),
      process.env,
      'WEBHOOK_SECRET_KEY',
    );
    say(`dev webhook secret-sealing key ${webhookKey.how}`);
    state.infraByName.webhookKey = webhookKey.key;
    say(`dev e-mail goes to ${s.mailDir}`);

    if (infraOnly) {
      console.log('\nInfrastructure is up. For services started by hand:');
      console.log(`  export DATABASE_URL='${state.infraByName.postgres.url}'`);
      console.log(
        `  export NATS_URL='${state.infraByName.nats.url}' NATS_STREAM=CUSTOS_DEV NATS_SUBJECT_PREFIX=custos.dev.events`,
      );
      console.log(`  export REDIS_URL='${state.infraByName.redis.url}' MAIL_DIR='${s.mailDir}'`);
      console.log(`  export KMS_PROVIDER=local LOCAL_KMS_MASTER_KEY="$(cat '${s.masterKeyFile}')"`);
      console.log('Ctrl-C stops it.\n');
    } else {
      await startServices(s, state, services);
    }
    running = true;
    checkpoint();
    const keepAlive = setInterval(() => undefined, 1 << 30);
    if (!infraOnly) void waitForHealth(s, state);
    await stopped;
    clearInterval(keepAlive);
  } catch (err) {
    if (!(err instanceof StopRequested) && !state.stopRequested) {
      exitCode = 1;
      if (err instanceof DevError) shout(err.message);
      else shout(`launcher error: ${err?.stack ?? err}`);
    }
  }
  await stopEverything(state);
  state.stopped = true;
  say('stopped');
  return exitCode;
}

const invokedDirectly = (() => {
  try {
    return fs.realpathSync(process.argv[1] ?? '') === fs.realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
})();

if (invokedDirectly) {
  main().then(
    (code) => process.exit(code),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
