import { type ChildProcess, spawn } from 'node:child_process';
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { freeMeshPort, makeMeshCerts } from '@custos/mesh';
import pg from 'pg';
import { type CpuUsage, cpuBetween, cpuSnapshot } from './cpu.js';
import { LoadGenerator } from './load.js';
import { type LatencySummary, summarize } from './stats.js';

/** A bare operation rate of this machine. */
export interface Ceiling {
  ops: number;
  seconds: number;
  ops_per_s: number;
  detail: Record<string, unknown>;
}

const ROWS = 10000;

/** `bench_point`: 10,000 rows of an integer key and a 64-character value, analysed. */
async function createPointTable(pool: pg.Pool): Promise<void> {
  await pool.query('CREATE TABLE IF NOT EXISTS bench_point (id integer PRIMARY KEY, value text NOT NULL)');
  await pool.query(
    `INSERT INTO bench_point SELECT g, md5(g::text) || md5((g + 1)::text) FROM generate_series(1, ${ROWS}) g
     ON CONFLICT (id) DO NOTHING`,
  );
  await pool.query('ANALYZE bench_point');
}

/**
 * The `pg` point-select rate: a pool of `concurrency` connections to `databaseUrl` (an empty database
 * of its own) each running `SELECT id, value FROM bench_point WHERE id = $1` in a closed loop, from
 * this one Node process, the way a service's pool talks to Postgres. One second of warm-up first.
 */
export async function pgPointSelect(
  databaseUrl: string,
  concurrency: number,
  seconds: number,
  measured: { start?: () => void; end?: () => void } = {},
): Promise<Ceiling & { latency_ms: LatencySummary }> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: concurrency });
  pool.on('error', () => undefined);
  try {
    await createPointTable(pool);
    const select = (id: number) => pool.query('SELECT id, value FROM bench_point WHERE id = $1', [id]);
    // Open every connection before timing anything.
    await Promise.all(Array.from({ length: concurrency }, (_, i) => select(i + 1)));

    const loopFor = async (s: number, latencies?: number[]) => {
      let ops = 0;
      const start = process.hrtime.bigint();
      const deadline = start + BigInt(Math.round(s * 1e9));
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (process.hrtime.bigint() < deadline) {
            const t0 = process.hrtime.bigint();
            const r = await select(1 + Math.floor(Math.random() * ROWS));
            if (r.rowCount !== 1) throw new Error('point select found no row');
            latencies?.push(Number(process.hrtime.bigint() - t0) / 1e6);
            ops++;
          }
        }),
      );
      return { ops, elapsed: Number(process.hrtime.bigint() - start) / 1e9 };
    };
    await loopFor(1);
    const latencies: number[] = [];
    measured.start?.();
    const { ops, elapsed } = await loopFor(seconds, latencies);
    measured.end?.();
    return {
      ops,
      seconds: Math.round(elapsed * 1000) / 1000,
      ops_per_s: Math.round((ops / elapsed) * 10) / 10,
      latency_ms: summarize(latencies),
      detail: {
        query: 'SELECT id, value FROM bench_point WHERE id = $1 (primary key, 10,000 rows, random id)',
        pool_size: concurrency,
        client: 'pg (node-postgres), one process',
      },
    };
  } finally {
    await pool.end();
  }
}

/**
 * The AES-256-GCM decrypt rate of one process: a `valueBytes` ciphertext with a 96-bit IV, 128-bit
 * tag and associated data (as vault-crypto binds vault id, path and version), decrypted and
 * authenticated in a loop with node:crypto.
 */
export function aesGcmDecrypt(seconds: number, valueBytes = 64): Ceiling {
  const key = randomBytes(32);
  const iv = randomBytes(12);
  const aad = Buffer.from('00000000-0000-4000-8000-000000000000:bench/s0:1');
  const plaintext = randomBytes(valueBytes);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(aad);
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  const tag = cipher.getAuthTag();
  const decrypt = () => {
    const d = createDecipheriv('aes-256-gcm', key, iv);
    d.setAAD(aad);
    d.setAuthTag(tag);
    return Buffer.concat([d.update(ciphertext), d.final()]);
  };
  if (!decrypt().equals(plaintext)) throw new Error('AES-256-GCM round trip failed');

  const loopFor = (s: number) => {
    let ops = 0;
    const start = process.hrtime.bigint();
    const deadline = start + BigInt(Math.round(s * 1e9));
    while (process.hrtime.bigint() < deadline) {
      for (let i = 0; i < 256; i++) decrypt();
      ops += 256;
    }
    return { ops, elapsed: Number(process.hrtime.bigint() - start) / 1e9 };
  };
  loopFor(Math.min(1, seconds));
  const { ops, elapsed } = loopFor(seconds);
  return {
    ops,
    seconds: Math.round(elapsed * 1000) / 1000,
    ops_per_s: Math.round((ops / elapsed) * 10) / 10,
    detail: { value_bytes: valueBytes, with_aad: true, threads: 1, api: 'node:crypto createDecipheriv' },
  };
}

/** How the hop floor's edge asks its backend: a unary call per request, or a message on one stream. */
export type FloorTransport = 'unary' | 'stream';

/** Starts `floor-process.js <role>` and resolves once it printed `ready`. */
function startFloorProcess(role: 'backend' | 'edge', env: Record<string, string>): Promise<ChildProcess> {
  const script = path.join(__dirname, 'floor-process.js');
  const child = spawn(process.execPath, [script, role], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let errText = '';
  child.stderr!.on('data', (d: Buffer) => (errText = (errText + d.toString()).slice(-2000)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`floor ${role} did not start: ${errText}`));
    }, 15_000);
    child.stdout!.on('data', (d: Buffer) => {
      if (d.toString().includes('ready')) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`floor ${role} exited (${code}): ${errText}`));
    });
  });
}

/**
 * The hop floor: the rate of the least a read through this mesh's shape can cost. Two processes
 * (floor-process.ts): an HTTP edge and a gRPC backend with a pool of `poolSize` to `databaseUrl`,
 * mutually authenticated with certificates of a fresh mesh CA as the services are; every HTTP
 * request becomes one gRPC exchange (`transport`) and one point-select, answered as JSON. The load
 * is this benchmark's own closed-loop generator with `concurrency` keep-alive connections, after
 * one second of warm-up. No token check, rate limit, policy, audit or decryption: a real read does
 * all of this and more, so its rate can only be lower. CPU per request of each process included.
 */
export async function hopFloor(
  databaseUrl: string,
  database: string,
  opts: { concurrency: number; seconds: number; transport: FloorTransport; poolSize?: number },
): Promise<Ceiling & { latency_ms: LatencySummary; cpu?: CpuUsage }> {
  const setup = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  try {
    await createPointTable(setup);
  } finally {
    await setup.end();
  }
  const certs = await makeMeshCerts({ services: ['gateway', 'vault-crypto'], certValidDays: 1 });
  const children: ChildProcess[] = [];
  const httpPort = String(await freeMeshPort());
  const load = new LoadGenerator(`http://127.0.0.1:${httpPort}`, opts.concurrency);
  try {
    const grpcPort = String(await freeMeshPort());
    const files = (s: 'gateway' | 'vault-crypto') => {
      const e = certs.envOf(s);
      return {
        FLOOR_CA_FILE: e.GRPC_TLS_CA_FILE,
        FLOOR_CERT_FILE: e.GRPC_TLS_CERT_FILE,
        FLOOR_KEY_FILE: e.GRPC_TLS_KEY_FILE,
      };
    };
    const poolSize = opts.poolSize ?? 16;
    const backend = await startFloorProcess('backend', {
      ...files('vault-crypto'),
      FLOOR_GRPC_PORT: grpcPort,
      FLOOR_DATABASE_URL: databaseUrl,
      FLOOR_POOL: String(poolSize),
    });
    children.push(backend);
    const edge = await startFloorProcess('edge', {
      ...files('gateway'),
      FLOOR_GRPC_PORT: grpcPort,
      FLOOR_HTTP_PORT: httpPort,
      FLOOR_TRANSPORT: opts.transport,
    });
    children.push(edge);
    const request = () => ({ method: 'GET', path: '/floor', headers: {} });
    await load.run(1, request);
    const labelled = new Map<string, number>([
      ['load-generator', process.pid],
      ['floor-edge', edge.pid!],
      ['floor-backend', backend.pid!],
    ]);
    const before = cpuSnapshot(labelled, database);
    const r = await load.run(opts.seconds, request);
    const after = cpuSnapshot(labelled, database);
    if (r.ok !== r.requests) throw new Error(`hop floor: ${r.requests - r.ok} requests failed`);
    return {
      ops: r.ok,
      seconds: r.seconds,
      ops_per_s: r.rps,
      latency_ms: r.latency_ms,
      cpu: cpuBetween(before, after, r.rps),
      detail: {
        shape: 'HTTP edge → one mTLS gRPC exchange → one Postgres point-select → JSON answer; nothing else',
        transport:
          opts.transport === 'unary'
            ? 'a unary gRPC call per request (as the services call each other today)'
            : 'one message each way on a long-lived bidirectional gRPC stream',
        processes: 'edge and backend are separate Node processes, like gateway and vault-crypto',
        backend_pool: poolSize,
        concurrency: opts.concurrency,
        messages: 'raw bytes, no protobuf',
      },
    };
  } finally {
    load.close();
    for (const c of children) c.kill('SIGKILL');
    fs.rmSync(certs.dir, { recursive: true, force: true });
  }
}
