import { type MeshAnvil, startMeshAnvil } from './anvil';
import { type MeshCerts, makeMeshCerts } from './certs';
import { type MeshKeys, type MeshProfile, meshEnv, randomMeshKeys, serviceEnv, uniqueNatsNames } from './env';
import { waitForHealth } from './health';
import { type MeshInfra, type MeshNatsAccess, startMeshInfra } from './mesh-infra';
import type { MeshRedisAccess } from './redis-server';
import { type MeshDatabase, migrateMesh } from './migrate';
import { type MeshPorts, freePorts } from './ports';
import type { ServiceName } from './services';
import { MeshSupervisor, type MeshSupervisorOptions } from './supervisor';

/** A mesh to start: its profile and infrastructure, and how to run its processes. */
export interface LaunchMeshOptions extends Omit<MeshSupervisorOptions, 'env'> {
  profile: MeshProfile;
  /** An existing database, as its schema owner: the migrations run as it before the services start. */
  databaseUrl: string;
  /**
   * A NATS to use as it is. Default: a private nats-server for this mesh (a user per service with
   * its own permissions; mesh-infra.ts), stopped with it.
   */
  natsUrl?: string;
  /** A Redis to use as it is. Default: a private redis-server with an ACL user per service. */
  redisUrl?: string;
  /** Where the private nats-server and redis-server keep their files. Default: a temp folder. */
  infraDir?: string;
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
  /**
   * Also start a local EVM chain (anvil, chain id 31337) on a free port and hand its URL to the
   * services as LOCAL_EVM_RPC_URL (signer registers it as the enabled testnet chain `anvil`).
   */
  anvil?: boolean;
}

/** A started, healthy mesh. */
export interface LaunchedMesh {
  /** The gateway: `http://127.0.0.1:<port>`. */
  baseUrl: string;
  /**
   * The variables every service got (without its own GRPC_PORT, METRICS_PORT and DATABASE_URL):
   * DATABASE_URL here is the owner's (for tests' own SQL); each service got its role's (`database`).
   * REDIS_URL here is the Redis test user's (with the mesh's own redis-server); each service got its own.
   */
  env: Record<string, string>;
  /** The owner's URL and each service's own database URL. */
  database: MeshDatabase;
  /** The mesh's CA and each service's certificate (any of them can be used to act as that service). */
  certs: MeshCerts;
  ports: MeshPorts;
  supervisor: MeshSupervisor;
  /** The mesh's own NATS (absent when `natsUrl` was given): each service's login and a test user's. */
  nats?: MeshNatsAccess;
  /** The mesh's own Redis (absent when `redisUrl` was given): each service's REDIS_URL and the test user's. */
  redis?: MeshRedisAccess;
  /** The mesh's own nats-server and redis-server, to stop and start again (fault tests). */
  servers: MeshInfra['servers'];
  /** The local EVM chain started with `anvil: true`: its JSON-RPC URL (and its pid, for CPU accounting). */
  anvil?: { url: string; pid?: number };
  /** The full environment of one service. */
  envOf(service: ServiceName): Record<string, string>;
  /** Stops the services, then the nats-server and redis-server started for the mesh; returns the services it had to kill. */
  stop(graceMs?: number): Promise<ServiceName[]>;
  /** Last resort when the process exits without `stop`: SIGKILL to the services and servers. */
  abandon(): void;
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
  const infra = await startMeshInfra({
    ...(o.natsUrl ? { natsUrl: o.natsUrl } : {}),
    ...(o.redisUrl ? { redisUrl: o.redisUrl } : {}),
    ...(o.infraDir ? { dir: o.infraDir } : {}),
    stream: names.natsStream,
    prefix: names.natsSubjectPrefix,
  });
  let anvil: MeshAnvil | undefined;
  if (o.anvil) {
    anvil = await startMeshAnvil().catch(async (err: unknown) => {
      await infra.stop(2000);
      throw err;
    });
  }
  const env = meshEnv({
    profile: o.profile,
    ports,
    databaseUrl: o.databaseUrl,
    natsUrl: infra.natsUrl,
    redisUrl: infra.redisUrl,
    ...names,
    keys: o.keys ?? randomMeshKeys(),
    mailDir: o.mailDir,
    tlsCaFile: certs.caFile,
    baseEnv: o.baseEnv ?? { PATH: process.env.PATH ?? '' },
    extraEnv: { ...(anvil ? { LOCAL_EVM_RPC_URL: anvil.url } : {}), ...o.extraEnv },
  });
  const {
    profile: _p,
    databaseUrl: _d,
    certDir: _c,
    infraDir: _i,
    anvil: _a,
    healthTimeoutMs,
    ...runOptions
  } = o;
  const database = await migrateMesh({
    databaseUrl: o.databaseUrl,
    ...(o.services ? { services: o.services } : {}),
    ...(o.root ? { root: o.root } : {}),
  }).catch(async (err: unknown) => {
    await infra.stop(2000);
    await anvil?.stop(2000);
    throw err;
  });
  const envOf = (s: ServiceName) =>
    serviceEnv(env, ports, s, { ...database.envOf(s), ...certs.envOf(s), ...infra.envOf(s) });
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
    await infra.stop(2000);
    await anvil?.stop(2000);
    const tails = supervisor.services
      .map((s) => `--- ${s}\n${supervisor.tail(s, 8).join('\n') || '(no output)'}`)
      .join('\n');
    throw new Error(`mesh did not become healthy: ${(err as Error).message}\n${tails}`);
  }
  const stop = async (graceMs = 10_000) => {
    const killed = await supervisor.stop(graceMs);
    await infra.stop(graceMs);
    await anvil?.stop(graceMs);
    return killed;
  };
  const abandon = () => {
    supervisor.signalAll('SIGKILL');
    infra.abandon();
    anvil?.process.signal('SIGKILL');
  };
  const nats = infra.nats ? { nats: infra.nats } : {};
  const redis = infra.redis ? { redis: infra.redis } : {};
  return {
    baseUrl,
    env,
    database,
    certs,
    ports,
    supervisor,
    ...nats,
    ...redis,
    servers: infra.servers,
    ...(anvil
      ? { anvil: { url: anvil.url, ...(anvil.process.pid !== undefined ? { pid: anvil.process.pid } : {}) } }
      : {}),
    envOf,
    stop,
    abandon,
  };
}
