import { type MeshCerts, makeMeshCerts } from './certs';
import { type MeshKeys, type MeshProfile, meshEnv, randomMeshKeys, serviceEnv, uniqueNatsNames } from './env';
import { waitForHealth } from './health';
import { type MeshDatabase, migrateMesh } from './migrate';
import { type MeshPorts, freePorts } from './ports';
import type { ServiceName } from './services';
import { MeshSupervisor, type MeshSupervisorOptions } from './supervisor';

/** A mesh to start: its profile and infrastructure, and how to run its processes. */
export interface LaunchMeshOptions extends Omit<MeshSupervisorOptions, 'env'> {
  profile: MeshProfile;
  /** An existing database, as its schema owner: the migrations run as it before the services start. */
  databaseUrl: string;
  /** Default NATS_URL, else nats://127.0.0.1:4222. */
  natsUrl?: string;
  /** Default REDIS_URL, else redis://127.0.0.1:6379. */
  redisUrl?: string;
  /** Default: a stream and subject prefix of its own. */
  natsStream?: string;
  natsSubjectPrefix?: string;
  /** Default: fresh random keys. */
  keys?: MeshKeys;
  /** Default: free ports below the ephemeral range. */
  ports?: MeshPorts;
  mailDir: string;
  /** Where the mesh's CA and service certificates are written. Default: a new temporary folder. */
  certDir?: string;
  /** Default: PATH only. */
  baseEnv?: Readonly<Record<string, string | undefined>>;
  extraEnv?: Readonly<Record<string, string>>;
  /** How long to wait for /v1/health to answer 200 (default 60 s). */
  healthTimeoutMs?: number;
}

/** A started, healthy mesh. */
export interface LaunchedMesh {
  /** The gateway: `http://127.0.0.1:<port>`. */
  baseUrl: string;
  /**
   * The variables every service got (without its own GRPC_PORT, METRICS_PORT and DATABASE_URL):
   * DATABASE_URL here is the owner's (for tests' own SQL); each service got its role's (`database`).
   */
  env: Record<string, string>;
  /** The owner's URL and each service's own database URL. */
  database: MeshDatabase;
  /** The mesh's CA and each service's certificate (any of them can be used to act as that service). */
  certs: MeshCerts;
  ports: MeshPorts;
  supervisor: MeshSupervisor;
  /** The full environment of one service. */
  envOf(service: ServiceName): Record<string, string>;
}

/**
 * Starts the nine services with the environment of `profile` and waits until GET /v1/health
 * answers 200. When it does not (in time, or because a service exited), stops them again and
 * throws with the last lines of each.
 */
export async function launchMesh(o: LaunchMeshOptions): Promise<LaunchedMesh> {
  const ports = o.ports ?? (await freePorts());
  const certs = await makeMeshCerts(o.certDir ? { dir: o.certDir } : {});
  const names =
    o.natsStream && o.natsSubjectPrefix
      ? { natsStream: o.natsStream, natsSubjectPrefix: o.natsSubjectPrefix }
      : uniqueNatsNames(o.profile === 'test' ? 'e2e' : o.profile);
  const env = meshEnv({
    profile: o.profile,
    ports,
    databaseUrl: o.databaseUrl,
    natsUrl: o.natsUrl ?? process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
    redisUrl: o.redisUrl ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    ...names,
    keys: o.keys ?? randomMeshKeys(),
    mailDir: o.mailDir,
    tlsCaFile: certs.caFile,
    baseEnv: o.baseEnv ?? { PATH: process.env.PATH ?? '' },
    ...(o.extraEnv ? { extraEnv: o.extraEnv } : {}),
  });
  const { profile: _p, databaseUrl: _d, certDir: _c, healthTimeoutMs, ...runOptions } = o;
  const database = await migrateMesh({
    databaseUrl: o.databaseUrl,
    ...(o.services ? { services: o.services } : {}),
    ...(o.root ? { root: o.root } : {}),
  });
  const envOf = (s: ServiceName) =>
    serviceEnv(env, ports, s, { ...database.envOf(s), ...certs.envOf(s) });
  const supervisor = new MeshSupervisor({ ...runOptions, env: envOf });
  const baseUrl = `http://127.0.0.1:${ports.http}`;
  supervisor.startAll();
  try {
    await waitForHealth(baseUrl, {
      timeoutMs: healthTimeoutMs ?? 60_000,
      giveUp: () => {
        const c = supervisor.crashes[0];
        return c ? `${c.service} exited (${c.description})` : undefined;
      },
    });
  } catch (err) {
    await supervisor.stop(2000);
    const tails = supervisor.services
      .map((s) => `--- ${s}\n${supervisor.tail(s, 8).join('\n') || '(no output)'}`)
      .join('\n');
    throw new Error(`mesh did not become healthy: ${(err as Error).message}\n${tails}`);
  }
  return { baseUrl, env, database, certs, ports, supervisor, envOf };
}
