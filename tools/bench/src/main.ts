import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createTestDatabase } from '@custos/service-kit/testing';
import { type Ceiling, type FloorTransport, aesGcmDecrypt, hopFloor, pgPointSelect } from './ceilings.js';
import { type CpuSnapshot, type CpuUsage, cpuBetween, cpuSnapshot } from './cpu.js';
import { anvilRawSend, ethersSign } from './evm-ceilings.js';
import { LoadGenerator } from './load.js';
import { type BenchMesh, REPO, startMesh } from './mesh.js';
import { type ScenarioResult, checkLines, cpuTable, fmt, resultTable, targetLines } from './report.js';
import { MIXED, SCENARIOS, type Scenario } from './scenarios.js';
import {
  SCENARIO_CEILINGS,
  type ScenarioCheck,
  ceilingRatios,
  checkFailures,
  serviceEnvOf,
} from './scenario-fns.js';
import { TARGET_CONDITIONS, evaluateTargets, ratio } from './targets.js';

const USAGE = `pnpm bench [-- options]    (or: node tools/bench/dist/main.js [options])

Drives the mesh through the gateway with a fixed concurrency for a fixed time and writes
bench/results/<name>.json beside this machine's bare ceilings (pg point-select, AES-256-GCM, the
hop floor, ethers signing, raw eth_sendRawTransaction to the mesh's anvil).

  --name <name>              result file name (default secrets-<cpus>cpu)
  -c, --concurrency <n>      connections to the gateway and pg pool size (default 64)
  -d, --duration <s>         measured seconds per scenario (default 20)
  --warmup <s>               unrecorded seconds before each scenario (default 5)
  --scenarios <list>         comma-separated: agent-read,user-write,agent-token,mixed,sign-intent,
                             eth-transfer (default all)
  --paths <n>                secrets agent-read and user-write spread their requests over (default 16;
                             mixed has 64 per org)
  --value-bytes <n>          size of each secret value (default 64)
  --ceiling-duration <s>     measured seconds of each bare ceiling (default 5)
  --log-level <level>        LOG_LEVEL of the services this command starts (default info)
  --out <dir>                folder of the result file (default <repo>/bench/results)
  -h, --help

Environment: BENCH_URL=http://host:port runs against a mesh that is already running instead of
starting one (it needs EMAIL_VERIFICATION_REQUIRED=false, or BENCH_EMAIL and BENCH_PASSWORD of a
user to sign in as, and RATE_LIMIT_RPS/RATE_LIMIT_BURST and, for agent-token,
AUTH_RATE_LIMIT_PER_MINUTE/AUTH_RATE_LIMIT_BURST above the offered load).
BENCH_ANVIL_URL (with BENCH_URL) is the JSON-RPC URL of the anvil behind that mesh's chain "anvil"
(eth-transfer funds its keys there and its ceiling sends to it).
TEST_DATABASE_URL names the Postgres server (a superuser; default postgres://postgres@127.0.0.1:5432).
The started mesh runs its own nats-server (a user per service) and redis-server (a user per service).`;

function positive(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number, got ${raw}`);
  return n;
}

function parse() {
  const { values } = parseArgs({
    options: {
      name: { type: 'string' },
      concurrency: { type: 'string', short: 'c' },
      duration: { type: 'string', short: 'd' },
      warmup: { type: 'string' },
      scenarios: { type: 'string' },
      paths: { type: 'string' },
      'value-bytes': { type: 'string' },
      'ceiling-duration': { type: 'string' },
      'log-level': { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    allowPositionals: false,
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const name = values.name ?? `secrets-${os.cpus().length}cpu`;
  if (!/^[A-Za-z0-9._-]{1,100}$/.test(name)) throw new Error(`--name may hold letters, digits, . _ - only`);
  const scenarios = (values.scenarios ?? Object.keys(SCENARIOS).join(',')).split(',').map((s) => s.trim());
  for (const s of scenarios) {
    if (!SCENARIOS[s]) throw new Error(`unknown scenario ${s} (known: ${Object.keys(SCENARIOS).join(', ')})`);
  }
  return {
    name,
    concurrency: Math.round(positive('concurrency', values.concurrency, 64)),
    duration: positive('duration', values.duration, 20),
    warmup: values.warmup === '0' ? 0 : positive('warmup', values.warmup, 5),
    scenarios,
    paths: Math.round(positive('paths', values.paths, 16)),
    valueBytes: Math.round(positive('value-bytes', values['value-bytes'], 64)),
    ceilingDuration: positive('ceiling-duration', values['ceiling-duration'], 5),
    logLevel: values['log-level'] ?? 'info',
    out: path.resolve(values.out ?? path.join(REPO, 'bench', 'results')),
  };
}

function git(...args: string[]): string | null {
  try {
    return execFileSync('git', args, {
      cwd: REPO,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return null;
  }
}

async function main(): Promise<number> {
  const opts = parse();
  const externalUrl = process.env.BENCH_URL?.replace(/\/+$/, '');
  const cpus = os.cpus();
  const startedAt = new Date();
  const loadavgAtStart = os.loadavg().map((v) => Math.round(v * 100) / 100);
  log(
    `custos bench: ${opts.name}, ${cpus.length} × ${cpus[0]?.model ?? 'unknown CPU'}, load ${loadavgAtStart[0]}`,
  );

  let mesh: BenchMesh | undefined;
  let failed = false;
  const drops: Array<() => Promise<void>> = [];
  const cleanup = async () => {
    const m = mesh;
    mesh = undefined;
    await m?.stop();
    if (m && failed) log(`service logs kept in ${m.logDir}`);
    else m?.removeFiles();
    for (const drop of drops.splice(0)) await drop().catch(() => undefined);
  };
  const onSignal = (signal: NodeJS.Signals) => {
    log(`${signal}: stopping`);
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  const ceilings: Record<string, Ceiling & { cpu?: ReturnType<typeof cpuBetween> }> = {};
  const ceilingErrors: Record<string, string> = {};
  const scenarios: Record<string, ScenarioResult | { error: string }> = {};
  try {
    // The bare ceilings first, on an idle machine, in a database of their own.
    log(`ceiling: AES-256-GCM decrypt of ${opts.valueBytes} B for ${opts.ceilingDuration} s`);
    ceilings['aes_256_gcm_decrypt'] = aesGcmDecrypt(opts.ceilingDuration, opts.valueBytes);
    const pgDb = await createTestDatabase('custos_bench_pg');
    drops.push(pgDb.drop);
    log(`ceiling: pg point-select, pool of ${opts.concurrency}, for ${opts.ceilingDuration} s`);
    const own = new Map([['load-generator', process.pid]]);
    let pgBefore: CpuSnapshot | undefined;
    let pgAfter: CpuSnapshot | undefined;
    const pgCeiling = await pgPointSelect(pgDb.url, opts.concurrency, opts.ceilingDuration, {
      start: () => (pgBefore = cpuSnapshot(own, pgDb.name)),
      end: () => (pgAfter = cpuSnapshot(own, pgDb.name)),
    });
    ceilings['pg_point_select'] = { ...pgCeiling, cpu: cpuBetween(pgBefore, pgAfter) };
    // The hop floor: HTTP edge → one mTLS gRPC exchange → one point-select, nothing else (the least
    // a read through this mesh's shape can cost), by a unary call and by a message on a stream.
    for (const transport of ['unary', 'stream'] as FloorTransport[]) {
      log(
        `ceiling: hop floor (${transport}), ${opts.concurrency} connections, for ${opts.ceilingDuration} s`,
      );
      ceilings[`hop_floor_${transport}`] = await hopFloor(pgDb.url, pgDb.name, {
        concurrency: opts.concurrency,
        seconds: opts.ceilingDuration,
        transport,
      });
    }
    await drops.pop()!();
    // The signing ceiling, before the mesh too: ethers 6 signing sign-intent's transaction on one
    // core and on every core at once.
    if (opts.scenarios.includes('sign-intent')) {
      log(`ceiling: ethers EIP-1559 signing, one thread, for ${opts.ceilingDuration} s`);
      ceilings['ethers_sign_eip1559_1core'] = await ethersSign(
        opts.ceilingDuration,
        1,
        Math.min(2, opts.ceilingDuration),
      );
      log(`ceiling: ethers EIP-1559 signing, ${cpus.length} threads, for ${opts.ceilingDuration} s`);
      ceilings['ethers_sign_eip1559_all_cores'] = await ethersSign(opts.ceilingDuration, cpus.length);
    }

    let baseUrl: string;
    let database: string | undefined;
    let anvilUrl = process.env.BENCH_ANVIL_URL?.replace(/\/+$/, '');
    const labelled = new Map<string, number>([['load-generator', process.pid]]);
    if (externalUrl) {
      baseUrl = externalUrl;
      log(`mesh: using BENCH_URL ${baseUrl}`);
    } else {
      const db = await createTestDatabase('custos_bench');
      drops.push(db.drop);
      database = db.name;
      log('mesh: starting the nine services');
      mesh = await startMesh({
        databaseUrl: db.url,
        // The bench profile of @custos/mesh: sign-up without verification, per-IP limits lifted.
        // BENCH_SERVICE_ENV ("K=V,K=V") sets service variables, to measure a lever with it off
        // (e.g. POLICY_DECISION_CACHE_TTL_MS=0); it is recorded in the results.
        extraEnv: { ...serviceEnvOf(process.env.BENCH_SERVICE_ENV), LOG_LEVEL: opts.logLevel },
      });
      baseUrl = mesh.baseUrl;
      anvilUrl = mesh.anvil.url;
      for (const [s, pid] of mesh.pids) labelled.set(s, pid);
      if (mesh.anvil.pid !== undefined) labelled.set('anvil', mesh.anvil.pid);
      log(`mesh: healthy at ${baseUrl} (logs in ${mesh.logDir})`);
    }

    const pgRate = pgCeiling.ops_per_s;
    for (const name of opts.scenarios) {
      let load: LoadGenerator | undefined;
      try {
        log(`${name}: setting up`);
        const scenario: Scenario = await SCENARIOS[name]!(baseUrl, {
          paths: opts.paths,
          valueBytes: opts.valueBytes,
          concurrency: opts.concurrency,
          ...(anvilUrl ? { anvilUrl } : {}),
        });
        // A scenario that judges its answers' bodies counts a 2xx it refuses as a failed request.
        load = new LoadGenerator(baseUrl, opts.concurrency, scenario.acceptBody);
        let warmOk = 0;
        if (opts.warmup > 0) {
          log(`${name}: warm-up ${opts.warmup} s`);
          warmOk = (await load.run(opts.warmup, scenario.request)).ok;
        }
        log(`${name}: ${opts.concurrency} connections for ${opts.duration} s`);
        const before = cpuSnapshot(labelled, database);
        const result = await load.run(opts.duration, scenario.request);
        const after = cpuSnapshot(labelled, database);
        const own = ceilingRatios(name, result.rps, ceilings);
        const measured: ScenarioResult = {
          description: scenario.description,
          ...result,
          failed: result.requests - result.ok,
          per_pg_point_select: ratio(result.rps, pgRate),
          ...(Object.keys(own).length > 0 ? { per_ceiling: own } : {}),
          cpu: cpuBetween(before, after, result.rps),
        };
        scenarios[name] = measured;
        const bad = result.requests - result.ok;
        if (bad > 0)
          log(`${name}: ${bad} of ${result.requests} requests failed: ${JSON.stringify(result.statuses)}`);
        if (scenario.check) {
          let check: ScenarioCheck;
          try {
            check = await scenario.check(warmOk + result.ok);
          } catch (err) {
            // A check that could not look fails the scenario too (its figures are kept).
            check = { consistent: false, discrepancies: NaN, error: (err as Error).message };
          }
          measured.check = check;
          measured.failed = bad + checkFailures(check);
          log(`${name}: check after the run: ${JSON.stringify(check)}`);
          if (!check.consistent) {
            failed = true;
            log(`${name}: FAILED: the check after the run is inconsistent`);
          }
        }
      } catch (err) {
        failed = true;
        scenarios[name] = { error: (err as Error).message };
        log(`${name}: FAILED: ${(err as Error).message}`);
      } finally {
        load?.close();
      }
      if (name === 'eth-transfer' && anvilUrl) {
        // Straight to the same anvil, after the scenario (its blocks do not weigh on the scenario's
        // calls to the node), with the mesh idle: what the chain node takes by itself.
        log(`ceiling: raw eth_sendRawTransaction to anvil, ${opts.concurrency} connections`);
        try {
          ceilings['anvil_send_raw_transaction'] = await anvilRawSend(anvilUrl, {
            concurrency: opts.concurrency,
            seconds: opts.ceilingDuration,
            threads: cpus.length,
            ...(labelled.has('anvil') ? { anvilPid: labelled.get('anvil')! } : {}),
            ...(database ? { database } : {}),
          });
          const s = scenarios[name];
          if (s && !('error' in s)) s.per_ceiling = ceilingRatios(name, s.rps, ceilings);
        } catch (err) {
          failed = true;
          ceilingErrors['anvil_send_raw_transaction'] = (err as Error).message;
          log(`ceiling anvil_send_raw_transaction: FAILED: ${(err as Error).message}`);
        }
      }
    }
  } finally {
    await cleanup();
  }

  const targets = evaluateTargets(scenarios, ceilings['pg_point_select']?.ops_per_s ?? 0);
  const result = {
    name: opts.name,
    timestamp: startedAt.toISOString(),
    git: { commit: git('rev-parse', 'HEAD'), dirty: (git('status', '--porcelain') ?? '') !== '' },
    node: process.version,
    machine: {
      cpu_model: cpus[0]?.model ?? null,
      cpus: cpus.length,
      memory_gib: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
      platform: `${os.platform()} ${os.release()}`,
      loadavg_at_start: loadavgAtStart,
    },
    settings: {
      concurrency: opts.concurrency,
      duration_s: opts.duration,
      warmup_s: opts.warmup,
      paths: opts.paths,
      value_bytes: opts.valueBytes,
      agent_token_agents: opts.concurrency,
      signing_agents: opts.scenarios.some((n) => n in SCENARIO_CEILINGS) ? opts.concurrency : 0,
      signing_chain: 'anvil (chain id 31337, automine), started with the mesh',
      mixed: {
        orgs: MIXED.orgs,
        agents_per_org: MIXED.agentsPerOrg,
        paths_per_org: MIXED.paths,
        write_every: MIXED.writeEvery,
      },
      ceiling_duration_s: opts.ceilingDuration,
      mesh: externalUrl ? 'external (BENCH_URL)' : 'started by the benchmark on this machine',
      service_env: serviceEnvOf(process.env.BENCH_SERVICE_ENV),
      log_level: externalUrl ? null : opts.logLevel,
      load_generator: 'same machine, one Node process, node:http keep-alive agent, closed loop',
    },
    scenarios,
    ceilings,
    ...(Object.keys(ceilingErrors).length > 0 ? { ceiling_errors: ceilingErrors } : {}),
    ratios: Object.fromEntries(
      Object.entries(scenarios)
        .filter((e): e is [string, ScenarioResult] => !('error' in e[1]))
        .flatMap(([n, s]) => [
          [`${n}_per_pg_point_select`, s.per_pg_point_select],
          [`${n}_per_hop_floor_unary`, ratio(s.rps, ceilings['hop_floor_unary']?.ops_per_s ?? 0)],
          ...Object.entries(s.per_ceiling ?? {}).map(([c, r]) => [`${n}_per_${c}`, r]),
        ]),
    ),
    targets: {
      ...TARGET_CONDITIONS,
      // Met when every target (not the horizon) is met; null when one of their scenarios did not run.
      all_met: allMet(Object.values(targets).filter((t) => t.kind === 'target')),
      items: targets,
    },
  };
  fs.mkdirSync(opts.out, { recursive: true });
  const file = path.join(opts.out, `${opts.name}.json`);
  fs.writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);

  console.log('');
  for (const line of resultTable(scenarios)) console.log(line);
  const checks = checkLines(scenarios);
  if (checks.length > 0) console.log(['', ...checks].join('\n'));
  const cpu = cpuTable(scenarios);
  if (cpu.length > 0) console.log(['', ...cpu].join('\n'));
  const pg = ceilings['pg_point_select'];
  const aes = ceilings['aes_256_gcm_decrypt'];
  console.log(
    `\nceilings: pg point-select ${fmt(pg?.ops_per_s ?? NaN)}/s (pool ${opts.concurrency}), ` +
      `AES-256-GCM decrypt ${opts.valueBytes} B ${fmt(aes?.ops_per_s ?? NaN)}/s (one thread)`,
  );
  const floor = (t: FloorTransport) => {
    const c = ceilings[`hop_floor_${t}`] as (Ceiling & { cpu?: CpuUsage }) | undefined;
    const us = c?.cpu?.us_per_request;
    return `${fmt(c?.ops_per_s ?? NaN)}/s (${fmt(c ? c.ops_per_s / (pg?.ops_per_s ?? NaN) : NaN, 3)} × pg; µs/req edge ${fmt(us?.['floor-edge'] ?? NaN)}, backend ${fmt(us?.['floor-backend'] ?? NaN)}, postgres ${fmt(us?.['postgres'] ?? NaN)})`;
  };
  console.log(
    `hop floor (HTTP → mTLS gRPC → point-select, nothing else): unary ${floor('unary')}; stream ${floor('stream')}`,
  );
  const sign1 = ceilings['ethers_sign_eip1559_1core'];
  const signAll = ceilings['ethers_sign_eip1559_all_cores'];
  if (sign1 || signAll) {
    const derived = sign1?.detail['with_address_from_public_key_ops_per_s'];
    const recovered = sign1?.detail['with_sender_recovery_ops_per_s'];
    console.log(
      `ethers EIP-1559 signing: ${fmt(sign1?.ops_per_s ?? NaN)}/s on one core, ` +
        `${fmt(signAll?.ops_per_s ?? NaN)}/s on ${cpus.length} at once` +
        (typeof derived === 'number'
          ? ` (on one core: ${fmt(derived)}/s also deriving the key's address, as signer does` +
            (typeof recovered === 'number' ? `; ${fmt(recovered)}/s recovering the sender instead` : '') +
            ')'
          : ''),
    );
  }
  const raw = ceilings['anvil_send_raw_transaction'];
  if (raw) console.log(`anvil eth_sendRawTransaction (pre-signed transfers): ${fmt(raw.ops_per_s)}/s`);
  for (const [n, s] of Object.entries(scenarios)) {
    if ('error' in s || !s.per_ceiling) continue;
    const parts = Object.entries(s.per_ceiling).map(([c, r]) => `${fmt(r ?? NaN, 3)} × ${c}`);
    console.log(`${n}: ${fmt(s.rps)}/s = ${parts.join(', ')}`);
  }
  console.log(
    `\ntargets of issues 14 and 17 (${TARGET_CONDITIONS.machine_cpus} cores, ${TARGET_CONDITIONS.concurrency} ` +
      `connections; this run: ${cpus.length} cores, ${opts.concurrency} connections):`,
  );
  for (const line of targetLines(targets)) console.log(`  ${line}`);
  const shown = path.relative(process.cwd(), file);
  console.log(`written: ${shown.startsWith('..') ? file : shown}`);
  return failed ? 1 : 0;
}

/** True when every item is met, false when one is not, null when one could not be judged. */
function allMet(items: Array<{ met: boolean | null }>): boolean | null {
  if (items.some((t) => t.met === false)) return false;
  return items.some((t) => t.met === null) ? null : true;
}

const STARTED = process.hrtime.bigint();

/** A progress line on stderr, with the seconds since start (what each phase of a run costs). */
function log(line: string): void {
  const seconds = Number(process.hrtime.bigint() - STARTED) / 1e9;
  process.stderr.write(`[bench ${seconds.toFixed(1).padStart(5)} s] ${line}\n`);
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    log(`failed: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
