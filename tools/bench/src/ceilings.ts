import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import pg from 'pg';
import { type LatencySummary, summarize } from './stats.js';

/** A bare operation rate of this machine. */
export interface Ceiling {
  ops: number;
  seconds: number;
  ops_per_s: number;
  detail: Record<string, unknown>;
}

const ROWS = 10000;

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
    await pool.query('CREATE TABLE bench_point (id integer PRIMARY KEY, value text NOT NULL)');
    await pool.query(
      `INSERT INTO bench_point SELECT g, md5(g::text) || md5((g + 1)::text) FROM generate_series(1, ${ROWS}) g`,
    );
    await pool.query('ANALYZE bench_point');
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
