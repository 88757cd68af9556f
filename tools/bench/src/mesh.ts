import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT, type ServiceName, launchMesh } from '@custos/mesh';

export { SERVICES, type ServiceName } from '@custos/mesh';

/** The repository root. */
export const REPO = REPO_ROOT;

/** A mesh this process started: its gateway URL, the pid of each service and where they log. */
export interface BenchMesh {
  baseUrl: string;
  /** The mesh's local EVM chain (anvil, automining; signer's chain `anvil`): JSON-RPC URL and pid. */
  anvil: { url: string; pid?: number };
  pids: Map<ServiceName, number>;
  logDir: string;
  stop(): Promise<void>;
  /** Removes the log and mail folders (after a clean run). */
  removeFiles(): void;
}

/**
 * Starts the nine services through @custos/mesh with its `bench` profile, against `databaseUrl`
 * (an empty database; migrations run at start), with a local anvil chain (signer registers it as
 * the enabled chain `anvil`, chain id 31337, for the signing scenarios), and waits until GET
 * /v1/health answers 200. Each
 * service writes its output to a file in `logDir`, not through a pipe into this process, so the
 * load generator does not pay for the logs.
 */
export async function startMesh(opts: {
  databaseUrl: string;
  extraEnv?: Record<string, string>;
}): Promise<BenchMesh> {
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-bench-logs-'));
  const mailDir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-bench-mail-'));
  // The services talk mTLS, as in production: the figure includes the handshakes and encryption.
  const certDir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-bench-certs-'));
  const mesh = await launchMesh({
    profile: 'bench',
    anvil: true,
    databaseUrl: opts.databaseUrl,
    mailDir,
    certDir,
    ...(opts.extraEnv ? { extraEnv: opts.extraEnv } : {}),
    logDir,
    output: 'file',
    // BENCH_NODE_ARGS: extra node flags of every service, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`.
    nodeArgs: (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean),
  });
  return {
    baseUrl: mesh.baseUrl,
    // launchMesh with `anvil: true` always starts it (or throws).
    anvil: mesh.anvil!,
    pids: mesh.supervisor.pids(),
    logDir,
    async stop() {
      // The services, then the mesh's own nats-server and redis-server.
      await mesh.stop(10_000);
    },
    removeFiles() {
      for (const dir of [logDir, mailDir, certDir]) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
