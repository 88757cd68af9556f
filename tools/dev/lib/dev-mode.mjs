// Dev mode once everything is built: Postgres, NATS and Redis (from the environment, already
// running, or started here), then the nine services through @custos/mesh (tools/mesh), the one mesh
// launcher, with the `dev` profile, supervised: a service that exits on its own is started again.
import fs from 'node:fs';
import path from 'node:path';
import {
  DEFAULT_RESTART_POLICY,
  MeshSupervisor,
  SERVICES,
  checkHealth,
  defaultPorts,
  makeMeshCerts,
  meshEnv,
  migrateMesh,
  notServingFrom,
  serviceEnv,
  serviceMain,
  startMeshAnvil,
} from '@custos/mesh';
import { resolveNats, resolvePostgres, resolveRedis } from './infra.mjs';
import { devMasterKey } from './master-key.mjs';
import {
  DevError,
  colorOf,
  devSettings,
  makeDataDirs,
  maskUrl,
  paint,
  prefix,
  printPrefixed,
  probeLine,
  reclaimLeftover,
  removePidFile,
  say,
  shout,
  sleep,
  writePidFile,
} from './util.mjs';

// ---------------------------------------------------------------------------------------------
// health

function reportUnhealthy(url, last, state, timeoutMs) {
  const lines = [];
  if (last?.error) lines.push(`GET ${url}: ${last.error} (the gateway is not answering)`);
  else if (last) {
    lines.push(`GET ${url}: HTTP ${last.status}`);
    const bad = notServingFrom(last.body);
    if (bad && bad.length > 0) lines.push(`not serving: ${bad.join(', ')}`);
    else if (!bad) lines.push(`body: ${String(last.text).slice(0, 400)}`);
  }
  const down = state.supervisor ? SERVICES.filter((s) => !state.supervisor.isRunning(s)) : [];
  if (down.length > 0) lines.push(`not running: ${down.join(', ')}`);
  shout(`Custos is not healthy after ${timeoutMs / 1000} s.\n!! ${lines.join('\n!! ')}`);
  say(`still running; logs in ${state.settings.logDir}. Will say so when /v1/health reports ok.`);
}

function printReady(s, state, baseUrl) {
  const rows = [
    ['gateway', baseUrl],
    ['mail', s.mailDir],
    ['logs', s.logDir],
    // The database URL carries the password: never on screen.
    ['postgres', maskUrl(state.infraByName.postgres.url)],
    ['nats', maskUrl(state.infraByName.nats.url)],
    ['redis', maskUrl(state.infraByName.redis.url)],
  ];
  console.log('');
  console.log(paint('1;32', `Custos dev is ready: ${baseUrl}`));
  for (const [k, v] of rows) console.log(`  ${k.padEnd(9)} ${v}`);
  console.log(`  Ctrl-C stops everything.\n`);
}

async function waitForHealth(s, state, baseUrl) {
  const url = `${baseUrl}/v1/health`;
  const deadline = Date.now() + s.healthTimeoutMs;
  let warned = false;
  let last;
  while (!state.stopping && !state.stopRequested) {
    const r = await checkHealth(baseUrl);
    if (state.stopping || state.stopRequested) return;
    if (r.ok) {
      printReady(s, state, baseUrl);
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

/** Says why a service ended on its own and when it starts again, with its last lines. */
function reportServiceExit(event, state) {
  // A Ctrl-C may be on its way; only complain when we are still running a moment later.
  setTimeout(() => {
    if (state.stopping || state.stopRequested) return;
    const again =
      event.restartInMs === null
        ? 'not restarting'
        : `restarting in ${Math.round(event.restartInMs / 100) / 10} s`;
    shout(
      `${event.service} (pid ${event.pid}) exited unexpectedly (${event.description}); ${again}. Log: ${path.join(state.settings.logDir, `${event.service}.log`)}`,
    );
    for (const l of event.tail.slice(-5)) printPrefixed(prefix(event.service, '1;31'), l);
  }, 300);
}

async function startServices(s, state) {
  const ports = defaultPorts(s.httpPort);
  const env = meshEnv({
    profile: 'dev',
    ports,
    databaseUrl: state.infraByName.postgres.url,
    natsUrl: state.infraByName.nats.url,
    natsStream: s.natsStream,
    natsSubjectPrefix: s.natsSubjectPrefix,
    redisUrl: state.infraByName.redis.url,
    keys: state.keys,
    mailDir: s.mailDir,
    tlsCaFile: state.certs.caFile,
    baseEnv: process.env,
    extraEnv: { LOCAL_EVM_RPC_URL: state.infraByName.anvil.url },
  });
  const busy = [];
  for (const [what, port] of [
    ['HTTP', ports.http],
    ...SERVICES.flatMap((x) => [
      [`${x} gRPC`, ports.grpc[x]],
      [`${x} metrics`, ports.metrics[x]],
    ]),
  ]) {
    if ((await probeLine(port, { timeoutMs: 500 })) !== null) busy.push(`${port} (${what})`);
  }
  if (busy.length > 0)
    shout(`ports already in use on 127.0.0.1, those services will fail to start: ${busy.join(', ')}`);
  const services = SERVICES.filter((svc) => {
    if (fs.existsSync(serviceMain(svc, s.root))) return true;
    shout(
      `${path.relative(s.root, serviceMain(svc, s.root))} does not exist even after the build: ${svc} is not started`,
    );
    return false;
  });
  // As the owner: migrations, then each service's own login role, which is all the service gets.
  say("applying migrations and provisioning each service's database role");
  const database = await migrateMesh({
    databaseUrl: state.infraByName.postgres.url,
    services,
    root: s.root,
  }).catch((err) => {
    throw new DevError(err.message);
  });
  const prefixes = new Map(SERVICES.map((svc, i) => [svc, prefix(svc, colorOf(i))]));
  const starts = new Map();
  state.supervisor = new MeshSupervisor({
    services,
    root: s.root,
    env: (svc) =>
      serviceEnv(env, ports, svc, {
        ...database.envOf(svc),
        ...state.certs.envOf(svc),
        // Its own NATS user, when the launcher runs the nats-server.
        ...state.infraByName.nats.envOf?.(svc),
        // Its own Redis user, when the launcher runs the redis-server.
        ...state.infraByName.redis.envOf?.(svc),
      }),
    logDir: s.logDir,
    detached: true,
    restart: DEFAULT_RESTART_POLICY,
    onLine: (svc, line) => printPrefixed(prefixes.get(svc), line),
    onSpawn: (svc, pid) => {
      if (pid) writePidFile(s.runDir, svc, pid);
      const n = (starts.get(svc) ?? 0) + 1;
      starts.set(svc, n);
      if (n > 1) say(`restarted ${svc} (pid ${pid ?? '?'})`);
    },
    onExit: (event) => {
      removePidFile(s.runDir, event.service);
      if (!event.expected) reportServiceExit(event, state);
    },
  });
  state.supervisor.startAll();
  const baseUrl = `http://127.0.0.1:${ports.http}`;
  say(
    `started ${services.length} services; waiting for ${baseUrl}/v1/health (up to ${s.healthTimeoutMs / 1000} s)`,
  );
  return baseUrl;
}

/** Stops services (SIGTERM, SIGKILL after 10 s), then what the launcher started, in reverse. */
async function stopEverything(state) {
  state.stopping = true;
  const sup = state.supervisor;
  const live = sup ? SERVICES.filter((svc) => sup.isRunning(svc)) : [];
  if (live.length > 0) say(`stopping ${live.length} services ...`);
  if (sup) {
    const killed = await sup.stop(10_000);
    if (killed.length > 0) shout(`still running after 10 s, killed: ${killed.join(', ')}`);
  }
  for (const infra of [...state.infra].reverse()) {
    if (!infra.stop) continue;
    say(`stopping ${infra.name} ...`);
    await infra.stop().catch((err) => shout(`stopping ${infra.name} failed: ${err.message}`));
  }
}

/** Synchronous last resort when the process exits without stopEverything having finished. */
function abandonAll(state) {
  state.supervisor?.signalAll('SIGTERM');
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
      state.supervisor?.signalAll('SIGKILL');
    } else {
      abandonAll(state);
      process.exit(130);
    }
  };
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => handler(sig));
}

/** A dev-only key from its variable or its file in the data folder, saying which. */
function devKey(s, file, variable, what) {
  const k = devMasterKey(path.join(s.dataDir, file), process.env, variable);
  say(`${what} ${k.how}`);
  return k.key;
}

/** Runs dev mode (everything built); resolves to the process exit code. */
export async function runDevMode({ infraOnly = false } = {}) {
  const state = {
    settings: undefined,
    stopping: false,
    stopRequested: false,
    signals: 0,
    supervisor: undefined,
    infra: [],
    infraByName: {},
    keys: undefined,
    certs: undefined,
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
    const masterKey = devMasterKey(s.masterKeyFile);
    say(`dev master key ${masterKey.how}`);
    // Services of an earlier launcher that died without stopping them: before their database goes.
    for (const svc of SERVICES)
      await reclaimLeftover(s.runDir, svc, path.join('services', svc, 'dist', 'main.js'));
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
    {
      // A local EVM chain (anvil, chain id 31337) that signer registers as the chain `anvil`; a
      // LOCAL_EVM_RPC_URL of your own (another node) is used instead.
      const infra = process.env.LOCAL_EVM_RPC_URL
        ? { name: 'anvil', url: process.env.LOCAL_EVM_RPC_URL, how: `LOCAL_EVM_RPC_URL as you set it` }
        : await startMeshAnvil({ port: s.anvilPort }).then((a) => ({
            name: 'anvil',
            url: a.url,
            how: `started anvil at ${a.url} (chain id 31337, in memory)`,
            stop: () => a.stop(),
            abandon: () => a.process.signal('SIGKILL'),
          }));
      state.infra.push(infra);
      state.infraByName.anvil = infra;
      say(`${'anvil'.padEnd(8)} ${infra.how}`);
      checkpoint();
    }
    state.keys = {
      kmsMasterKey: masterKey.key,
      tokenSigningKek: devKey(s, 'token-signing.kek', 'TOKEN_SIGNING_KEK', 'dev token-signing KEK'),
      auditHmacKey: devKey(s, 'audit-hmac.key', 'AUDIT_HMAC_KEY', 'dev audit HMAC key'),
      auditCheckpointSigningKey: devKey(
        s,
        'audit-checkpoint.key',
        'AUDIT_CHECKPOINT_SIGNING_KEY',
        'dev audit checkpoint signing key',
      ),
      mfaSecretKey: devKey(s, 'mfa-secret.key', 'MFA_SECRET_KEY', 'dev TOTP secret-sealing key'),
      webhookSecretKey: devKey(
        s,
        'webhook-secret.key',
        'WEBHOOK_SECRET_KEY',
        'dev webhook secret-sealing key',
      ),
    };
    say(`dev e-mail goes to ${s.mailDir}`);
    // gRPC between the services is mTLS: a dev CA (kept across restarts) and fresh service certificates.
    state.certs = await makeMeshCerts({ dir: path.join(s.dataDir, 'certs'), reuseCa: true });
    say(`mesh certificates in ${state.certs.dir} (${state.certs.reusedCa ? 'dev CA reused' : 'new dev CA'})`);

    let baseUrl;
    if (infraOnly) {
      // The password stays in its file (the line reads it when pasted) or in your DATABASE_URL.
      const dbLine = s.databaseUrl
        ? `# DATABASE_URL as you set it: ${maskUrl(s.databaseUrl)}`
        : `export DATABASE_URL="${maskUrl(state.infraByName.postgres.url).replace(':***@', `:$(cat '${s.pgPasswordFile}')@`)}"`;
      console.log('\nInfrastructure is up. For services started by hand:');
      console.log(`  ${dbLine}`);
      console.log(
        '  # that is the owner: run each services/<name>/dist/migrate.js with it, then start the service with DATABASE_URL as custos_<name>',
      );
      const { nats, redis } = state.infraByName;
      console.log(
        `  export NATS_URL='${nats.url}' NATS_STREAM='${s.natsStream}' NATS_SUBJECT_PREFIX='${s.natsSubjectPrefix}'`,
      );
      // Passwords stay in their files (the lines read them when pasted).
      if (nats.envDir)
        console.log(`  export $(cat '${nats.envDir}/<name>')   # NATS_USER and NATS_PASSWORD of <name>`);
      if (redis.envDir) {
        console.log(`  export $(cat '${redis.envDir}/<name>')   # REDIS_URL of <name> (its own Redis user)`);
        console.log(`  export MAIL_DIR='${s.mailDir}'`);
      } else console.log(`  export REDIS_URL='${maskUrl(redis.url)}' MAIL_DIR='${s.mailDir}'`);
      console.log(
        `  export GRPC_TLS_CA_FILE='${state.certs.caFile}' GRPC_TLS_CERT_FILE='${state.certs.dir}/<name>.crt' GRPC_TLS_KEY_FILE='${state.certs.dir}/<name>.key'`,
      );
      console.log(
        `  export KMS_PROVIDER=local KMS_ALLOW_LOCAL=true LOCAL_KMS_MASTER_KEY="$(cat '${s.masterKeyFile}')"`,
      );
      console.log('Ctrl-C stops it.\n');
    } else {
      baseUrl = await startServices(s, state);
    }
    running = true;
    checkpoint();
    const keepAlive = setInterval(() => undefined, 1 << 30);
    if (baseUrl) void waitForHealth(s, state, baseUrl);
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
