import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { waitFor } from '@custos/service-kit/testing';

/**
 * The nine services, in start order (the gateway last). The same processes and variables as the
 * end-to-end mesh of tools/e2e (src/mesh.ts), which is test code and not built: keep the two in step.
 */
export const SERVICES = [
  'identity',
  'vault-crypto',
  'policy',
  'signer',
  'approvals',
  'audit',
  'webhook-dispatcher',
  'billing',
  'gateway',
] as const;
export type ServiceName = (typeof SERVICES)[number];

/** The repository root (this file runs from tools/bench/dist). */
export const REPO = path.resolve(__dirname, '..', '..', '..');

/** A mesh this process started: its gateway URL, the pid of each service and where they log. */
export interface BenchMesh {
  baseUrl: string;
  pids: Map<ServiceName, number>;
  logDir: string;
  stop(): Promise<void>;
  /** Removes the log and mail folders (after a clean run). */
  removeFiles(): void;
}

const handedOut = new Set<number>();

/** A free port below Linux's ephemeral range, so no outgoing connection can take it meanwhile. */
async function meshPort(): Promise<number> {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    if (handedOut.has(port)) continue;
    const free = await new Promise<boolean>((resolve) => {
      const srv = net.createServer();
      srv.once('error', () => resolve(false));
      srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (free) {
      handedOut.add(port);
      return port;
    }
  }
}

/** Last lines of a service's log file (for a failed start). */
function tail(file: string, lines = 8): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no output)';
  }
}

/**
 * Starts the nine services from their dist/ against `databaseUrl` (an empty database; migrations run
 * at start) and waits until GET /v1/health answers 200. Each service writes its output to a file in
 * `logDir`, not through a pipe into this process, so the load generator does not pay for the logs.
 */
export async function startMesh(opts: {
  databaseUrl: string;
  extraEnv?: Record<string, string>;
}): Promise<BenchMesh> {
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-bench-logs-'));
  const mailDir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-bench-mail-'));
  const stream = `BENCH_${randomBytes(4).toString('hex').toUpperCase()}`;
  const grpc = new Map<ServiceName, number>();
  const metrics = new Map<ServiceName, number>();
  for (const s of SERVICES) {
    grpc.set(s, await meshPort());
    metrics.set(s, await meshPort());
  }
  const httpPort = await meshPort();
  const addr = (s: ServiceName) => `127.0.0.1:${grpc.get(s)}`;
  const env: Record<string, string> = {
    DATABASE_URL: opts.databaseUrl,
    MIGRATE_ON_START: 'true',
    NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
    NATS_STREAM: stream,
    NATS_SUBJECT_PREFIX: `bench.${stream.toLowerCase()}`,
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    KMS_PROVIDER: 'local',
    LOCAL_KMS_MASTER_KEY: randomBytes(32).toString('base64'),
    TOKEN_SIGNING_KEK: randomBytes(32).toString('base64'),
    AUDIT_HMAC_KEY: randomBytes(32).toString('base64'),
    WEBHOOK_SECRET_KEY: randomBytes(32).toString('base64'),
    MAIL_DIR: mailDir,
    GRPC_HOST: '127.0.0.1',
    METRICS_HOST: '127.0.0.1',
    HOST: '127.0.0.1',
    PORT: String(httpPort),
    LOG_LEVEL: 'info',
    SHUTDOWN_GRACE_MS: '2000',
    IDENTITY_ADDR: addr('identity'),
    VAULT_CRYPTO_ADDR: addr('vault-crypto'),
    POLICY_ADDR: addr('policy'),
    SIGNER_ADDR: addr('signer'),
    APPROVALS_ADDR: addr('approvals'),
    AUDIT_ADDR: addr('audit'),
    WEBHOOK_DISPATCHER_ADDR: addr('webhook-dispatcher'),
    BILLING_ADDR: addr('billing'),
    ...opts.extraEnv,
  };
  const processes = new Map<ServiceName, ChildProcess>();
  const pids = new Map<ServiceName, number>();
  for (const s of SERVICES) {
    const fd = fs.openSync(path.join(logDir, `${s}.log`), 'a');
    // BENCH_NODE_ARGS: extra node flags of every service, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`.
    const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const child = spawn(process.execPath, [...nodeArgs, path.join(REPO, 'services', s, 'dist', 'main.js')], {
      cwd: REPO,
      env: {
        PATH: process.env.PATH ?? '',
        ...env,
        GRPC_PORT: String(grpc.get(s)),
        METRICS_PORT: String(metrics.get(s)),
      },
      stdio: ['ignore', fd, fd],
    });
    fs.closeSync(fd);
    processes.set(s, child);
    if (child.pid !== undefined) pids.set(s, child.pid);
  }

  const stopChild = (child: ChildProcess) =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      const force = setTimeout(() => child.kill('SIGKILL'), 10000);
      child.once('exit', () => {
        clearTimeout(force);
        resolve();
      });
      child.kill('SIGTERM');
    });
  const baseUrl = `http://127.0.0.1:${httpPort}`;
  const mesh: BenchMesh = {
    baseUrl,
    pids,
    logDir,
    async stop() {
      await Promise.all([...processes.values()].map(stopChild));
    },
    removeFiles() {
      for (const dir of [logDir, mailDir]) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await waitFor(async () => (await fetch(`${baseUrl}/v1/health`)).status === 200, 60000, 200);
  } catch (err) {
    const tails = SERVICES.map((s) => `--- ${s}\n${tail(path.join(logDir, `${s}.log`))}`).join('\n');
    await mesh.stop();
    throw new Error(`mesh did not become healthy: ${(err as Error).message}\n${tails}`);
  }
  return mesh;
}
