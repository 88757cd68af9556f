import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { createTestDatabase, waitFor } from '@custos/service-kit/testing';

/** The nine services, in start order (the gateway last). */
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

const REPO = path.resolve(__dirname, '..', '..', '..');

const handedOut = new Set<number>();

/**
 * A free port below Linux's ephemeral range (32768+), so that no outgoing connection or `listen(0)`
 * elsewhere on the machine can take it between this check and the service binding it.
 */
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

/** A running mesh: nine processes on free loopback ports, a fresh database and its own NATS stream. */
export interface Mesh {
  baseUrl: string;
  env: Record<string, string>;
  processes: Map<ServiceName, ChildProcess>;
  /** Captured stdout+stderr of each service. */
  output: Map<ServiceName, string[]>;
  kill(service: ServiceName, signal?: NodeJS.Signals): Promise<number | null>;
  /** Starts a service again after `kill`, on the same ports and settings (output is appended). */
  restart(service: ServiceName): void;
  stop(): Promise<void>;
}

/** Starts the nine services as separate processes and waits until /v1/health says ok. */
export async function startMesh(opts: { extraEnv?: Record<string, string> } = {}): Promise<Mesh> {
  const database = await createTestDatabase('custos_e2e');
  const stream = `E2E_${randomBytes(4).toString('hex').toUpperCase()}`;
  const ports: Record<string, number> = {};
  for (const s of SERVICES) {
    ports[`${s}:grpc`] = await meshPort();
    ports[`${s}:metrics`] = await meshPort();
  }
  const httpPort = await meshPort();
  const addr = (s: ServiceName) => `127.0.0.1:${ports[`${s}:grpc`]}`;
  const env: Record<string, string> = {
    DATABASE_URL: database.url,
    MIGRATE_ON_START: 'true',
    NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
    NATS_STREAM: stream,
    NATS_SUBJECT_PREFIX: `e2e.${stream.toLowerCase()}`,
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    KMS_PROVIDER: 'local',
    LOCAL_KMS_MASTER_KEY: randomBytes(32).toString('base64'),
    TOKEN_SIGNING_KEK: randomBytes(32).toString('base64'),
    AUDIT_HMAC_KEY: randomBytes(32).toString('base64'),
    WEBHOOK_SECRET_KEY: randomBytes(32).toString('base64'),
    MAIL_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'custos-e2e-mail-')),
    GRPC_HOST: '127.0.0.1',
    METRICS_HOST: '127.0.0.1',
    HOST: '127.0.0.1',
    PORT: String(httpPort),
    LOG_LEVEL: 'info',
    SHUTDOWN_GRACE_MS: '2000',
    // Tests sign in far more often than a person; the auth limit has its own gateway test.
    AUTH_RATE_LIMIT_PER_MINUTE: '1000000',
    AUTH_RATE_LIMIT_BURST: '1000000',
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
  const output = new Map<ServiceName, string[]>();
  const launch = (s: ServiceName) => {
    const lines = output.get(s) ?? [];
    output.set(s, lines);
    const child = spawn(process.execPath, [path.join(REPO, 'services', s, 'dist', 'main.js')], {
      env: {
        PATH: process.env.PATH ?? '',
        ...env,
        GRPC_PORT: String(ports[`${s}:grpc`]),
        METRICS_PORT: String(ports[`${s}:metrics`]),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.on('data', (d: Buffer) => lines.push(...d.toString('utf8').split('\n').filter(Boolean)));
    child.stderr?.on('data', (d: Buffer) => lines.push(...d.toString('utf8').split('\n').filter(Boolean)));
    processes.set(s, child);
  };
  for (const s of SERVICES) launch(s);
  const baseUrl = `http://127.0.0.1:${httpPort}`;
  const mesh: Mesh = {
    baseUrl,
    env,
    processes,
    output,
    async kill(service, signal = 'SIGKILL') {
      const child = processes.get(service);
      if (!child || child.exitCode !== null || child.signalCode !== null) return child?.exitCode ?? null;
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill(signal);
      return exited;
    },
    restart(service) {
      const child = processes.get(service);
      if (child && child.exitCode === null && child.signalCode === null)
        throw new Error(`${service} is still running`);
      launch(service);
    },
    async stop() {
      await Promise.all(SERVICES.map((s) => mesh.kill(s, 'SIGTERM')));
      await database.drop();
    },
  };
  try {
    await waitFor(async () => (await fetch(`${baseUrl}/v1/health`)).status === 200, 60000, 200);
  } catch (err) {
    const tail = SERVICES.map((s) => `--- ${s}\n${(output.get(s) ?? []).slice(-5).join('\n')}`).join('\n');
    await mesh.stop();
    throw new Error(`mesh did not become healthy: ${(err as Error).message}\n${tail}`);
  }
  return mesh;
}
