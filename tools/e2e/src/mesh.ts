import type { ChildProcess } from 'node:child_process';
import { createPrivateKey } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  type LaunchedMesh,
  type MeshNatsAccess,
  type MeshRedisAccess,
  SERVICES,
  type ServiceName,
  checkHealth,
  launchMesh,
} from '@custos/mesh';
import { createTestDatabase } from '@custos/service-kit/testing';
import type { SmtpCapture } from '@custos/testing';
import { type GoogleIdp, googleIdpClient } from './google-idp';
import { readMailSpool } from './mail-spool';
import type { SharedProfile } from './profiles';
import { type SharedRunInfo, sharedRun } from './shared-run';

export { SERVICES, type ServiceName };
export { PLATFORM_ADMIN_EMAIL, type SharedProfile } from './profiles';

/**
 * A running mesh: nine processes on free loopback ports with a database and NATS stream of their
 * own. A private one (`startMesh`) belongs to one spec file; a shared one (`sharedMesh`) serves
 * every spec file of the run that asks for its profile.
 */
export interface Mesh {
  baseUrl: string;
  env: Record<string, string>;
  /** The processes of a private mesh (empty for a shared one: it runs in jest's main process). */
  processes: Map<ServiceName, ChildProcess>;
  /** Captured stdout+stderr of each service (of a shared mesh: since this spec file attached). */
  output: Map<ServiceName, string[]>;
  /** Kills a service of a private mesh (a shared mesh refuses). */
  kill(service: ServiceName, signal?: NodeJS.Signals): Promise<number | null>;
  /** Starts a service again after `kill`, on the same ports and settings (output is appended). */
  restart(service: ServiceName): void;
  /** Stops a private mesh and drops its database; does nothing to a shared one. */
  stop(): Promise<void>;
  /** Where a shared mesh's e-mail arrives (undefined for a private mesh). */
  mail?: SmtpCapture;
  /** The mesh's own NATS: its URL, each service's login, and a test user that may do anything. */
  nats?: MeshNatsAccess;
  /** The mesh's own Redis: each service's REDIS_URL (its ACL user), and a test user's that may do anything. */
  redis?: MeshRedisAccess;
  /** A private mesh's nats-server and redis-server, to stop and start again (fault tests). */
  servers?: LaunchedMesh['servers'];
}

/**
 * Starts a private mesh: the nine services with the `test` profile of @custos/mesh plus
 * `extraEnv`, against a fresh database; waits until /v1/health answers 200. For spec files that
 * kill or restart services, tamper with what all orgs share, or need settings no shared profile has.
 */
export async function startMesh(
  opts: {
    extraEnv?: Record<string, string>;
    /** Where the mesh's database is made (default: TEST_DATABASE_URL's server); a fault test's own cluster. */
    postgresUrl?: (database: string) => string;
  } = {},
): Promise<Mesh> {
  const mailDir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-e2e-mail-'));
  const certDir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-e2e-certs-'));
  const output = new Map<ServiceName, string[]>(SERVICES.map((s) => [s, []]));
  let launched;
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  // Ports are picked free, but another process on the machine (a mesh of another jest worker) can
  // bind one before the service does: that start fails with EADDRINUSE and is tried once more on
  // new ports and a new database. Any other failure fails at once.
  for (let attempt = 1; ; attempt++) {
    database = await createTestDatabase('custos_e2e', opts.postgresUrl);
    for (const lines of output.values()) lines.length = 0;
    try {
      launched = await launchMesh({
        profile: 'test',
        databaseUrl: database.url,
        mailDir,
        certDir,
        ...(opts.extraEnv ? { extraEnv: opts.extraEnv } : {}),
        onLine: (s, line) => output.get(s)!.push(line),
        // A busy 2-core machine can take more than a minute (a service that exits fails at once); the
        // jest hook that calls this gives up at 120 s (testTimeout).
        healthTimeoutMs: 100_000,
      });
      break;
    } catch (err) {
      await database.drop();
      if (attempt >= 2 || !/EADDRINUSE/.test((err as Error).message)) throw err;
    }
  }
  const { supervisor, stop: stopMesh } = launched;
  return {
    baseUrl: launched.baseUrl,
    env: launched.env,
    processes: supervisor.processes,
    output,
    kill: (service, signal = 'SIGKILL') => supervisor.kill(service, signal),
    restart: (service) => supervisor.restart(service),
    servers: launched.servers,
    ...(launched.nats ? { nats: launched.nats } : {}),
    ...(launched.redis ? { redis: launched.redis } : {}),
    async stop() {
      await stopMesh(10_000);
      await database.drop();
      fs.rmSync(mailDir, { recursive: true, force: true });
      fs.rmSync(certDir, { recursive: true, force: true });
    },
  };
}

/** Output lines of a shared mesh's services, read from their log files from where they were at `start`. */
class LogLines extends Map<ServiceName, string[]> {
  private readonly offsets = new Map<ServiceName, number>();

  constructor(private readonly logDir: string) {
    super();
    for (const s of SERVICES) this.offsets.set(s, this.bytes(s));
  }

  private file(s: ServiceName): string {
    return path.join(this.logDir, `${s}.log`);
  }

  private bytes(s: ServiceName): number {
    try {
      return fs.statSync(this.file(s)).size;
    } catch {
      return 0;
    }
  }

  override get(s: ServiceName): string[] | undefined {
    if (!SERVICES.includes(s)) return undefined;
    const from = this.offsets.get(s) ?? 0;
    const to = this.bytes(s);
    if (to <= from) return [];
    const buf = Buffer.alloc(to - from);
    const fd = fs.openSync(this.file(s), 'r');
    try {
      fs.readSync(fd, buf, 0, buf.length, from);
    } finally {
      fs.closeSync(fd);
    }
    return buf.toString('utf8').split('\n').filter(Boolean);
  }

  override get size(): number {
    return SERVICES.length;
  }

  override has(s: ServiceName): boolean {
    return SERVICES.includes(s);
  }

  override *entries(): MapIterator<[ServiceName, string[]]> {
    for (const s of SERVICES) yield [s, this.get(s)!];
  }

  override *keys(): MapIterator<ServiceName> {
    yield* SERVICES;
  }

  override *values(): MapIterator<string[]> {
    for (const s of SERVICES) yield this.get(s)!;
  }

  override [Symbol.iterator](): MapIterator<[ServiceName, string[]]> {
    return this.entries();
  }
}

function refuse(what: string): never {
  throw new Error(
    `${what}: this is a shared mesh, other spec files use it too; start a private one with startMesh()`,
  );
}

/**
 * The mesh of `profile` (src/profiles.ts) that the global setup started for the whole run. Every
 * spec file that asks for the same profile gets the same mesh: create fresh users and orgs
 * (quickUser) and assert on them only, never on what the whole database holds. `stop()` does
 * nothing; `kill` and `restart` throw.
 */
export async function sharedMesh(profile: SharedProfile = 'default'): Promise<Mesh> {
  const run = sharedRun();
  const info = run.meshes[profile];
  if (!info) {
    throw new Error(
      `no shared mesh '${profile}' in this run: the global setup starts the profiles the selected spec files name as sharedMesh('${profile}')`,
    );
  }
  const health = await checkHealth(info.baseUrl, 10_000);
  if (!health.ok) {
    throw new Error(
      `the shared mesh '${profile}' is not healthy (${health.error ?? `HTTP ${health.status} ${health.text}`}); logs in ${info.logDir}`,
    );
  }
  return {
    baseUrl: info.baseUrl,
    env: info.env,
    processes: new Map(),
    output: new LogLines(info.logDir),
    kill: async (service) => refuse(`kill ${service}`),
    restart: (service) => refuse(`restart ${service}`),
    stop: async () => undefined,
    mail: sharedMail(run),
    ...(info.nats ? { nats: info.nats } : {}),
    ...(info.redis ? { redis: info.redis } : {}),
  };
}

/** The e-mail every shared mesh sends, as an SmtpCapture (`close` does nothing). */
export function sharedMail(run: SharedRunInfo = sharedRun()): SmtpCapture {
  return readMailSpool(run.mail.dir, run.mail);
}

/**
 * The Google stand-in the shared meshes trust (GOOGLE_JWKS_URL), able to sign ID tokens here for
 * `clientId`, which must be the one they accept (GOOGLE_CLIENT_ID).
 */
export function sharedGoogleIdp(clientId: string, run: SharedRunInfo = sharedRun()): GoogleIdp {
  const g = run.google;
  if (clientId !== g.clientId) {
    throw new Error(`the shared meshes accept Google ID tokens for ${g.clientId}, not ${clientId}`);
  }
  const key = { kid: g.kid, privateKey: createPrivateKey(g.privateKeyPem), publicJwk: g.publicJwk };
  return googleIdpClient(g.jwksUrl, key, g.clientId);
}

/** The public half of the shared meshes' federation key (FEDERATION_RS256_PRIVATE_KEY_FILE), PEM. */
export function sharedFederationPublicKey(run: SharedRunInfo = sharedRun()): string {
  return run.federation.publicKeyPem;
}
