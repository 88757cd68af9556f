import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type MeshNats, type NatsLogin, startMeshNats } from './nats-server';
import { type MeshRedis, type MeshRedisAccess, startMeshRedis } from './redis-server';
import type { ServiceName } from './services';

/** How tests reach a mesh's own NATS: its URL, each service's login and the test user's. */
export interface MeshNatsAccess {
  url: string;
  /** Each service's NATS_USER/NATS_PASSWORD (services without NATS have none). */
  users: Partial<Record<ServiceName, NatsLogin>>;
  /** May publish and subscribe anything; for tests only, never given to a service. */
  testUser: NatsLogin;
}

/** One of a mesh's own servers, stopped and started again on the same port and settings. */
export interface ServerControl {
  stop(graceMs?: number): Promise<void>;
  start(): Promise<void>;
}

/** The NATS and Redis of one mesh: given ones, or private servers started for it. */
export interface MeshInfra {
  natsUrl: string;
  /** The given Redis URL, or the test user's of the mesh's own redis-server (each service gets its own). */
  redisUrl: string;
  /** Present when the mesh runs its own nats-server. */
  nats?: MeshNatsAccess;
  /** Present when the mesh runs its own redis-server: each service's REDIS_URL and the test user's. */
  redis?: MeshRedisAccess;
  /** A service's own NATS credentials and REDIS_URL, for serviceEnv (undefined: not for this service). */
  envOf(service: ServiceName): Record<string, string | undefined>;
  /** The nats-server and redis-server it started, to stop and start again (fault tests). */
  servers: { nats?: ServerControl; redis?: ServerControl };
  /** Stops the servers it started and removes a folder it made. */
  stop(graceMs?: number): Promise<void>;
  /** Last resort when the process exits without `stop`: SIGKILL to the servers it started. */
  abandon(): void;
}

/** What a mesh's infrastructure needs. */
export interface MeshInfraOptions {
  /** A NATS to use as it is (no credentials handed out). Default: a private nats-server. */
  natsUrl?: string;
  /** A Redis to use as it is (every service gets this URL). Default: a private redis-server, a user per service. */
  redisUrl?: string;
  /** Where the private servers keep their config and JetStream store. Default: a temp folder. */
  dir?: string;
  natsPort?: number;
  redisPort?: number;
  stream: string;
  prefix: string;
}

/**
 * Starts what the mesh needs beyond Postgres: unless given URLs, a private nats-server (JetStream,
 * a user per service with the permissions of @custos/events, random passwords; store in
 * `<dir>/nats`) and a private in-memory redis-server (an ACL user per service with the rights of
 * @custos/service-kit redis-acl.ts, random passwords, the default user off). Unlike the
 * machine's shared servers, these make the services prove who they are, as in production.
 */
export async function startMeshInfra(o: MeshInfraOptions): Promise<MeshInfra> {
  const madeDir = o.dir === undefined && (!o.natsUrl || !o.redisUrl);
  const dir = o.dir ?? (madeDir ? fs.mkdtempSync(path.join(os.tmpdir(), 'custos-mesh-infra-')) : '');
  let nats: MeshNats | undefined;
  let redis: MeshRedis | undefined;
  const stop = async (graceMs = 10_000) => {
    await Promise.all([nats?.stop(graceMs), redis?.stop(graceMs)]);
    if (madeDir) fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    if (!o.natsUrl) {
      nats = await startMeshNats({
        dir: path.join(dir, 'nats'),
        stream: o.stream,
        prefix: o.prefix,
        ...(o.natsPort ? { port: o.natsPort } : {}),
      });
    }
    if (!o.redisUrl) {
      redis = await startMeshRedis({
        dir: path.join(dir, 'redis'),
        ...(o.redisPort ? { port: o.redisPort } : {}),
      });
    }
  } catch (err) {
    await stop(2000);
    throw err;
  }
  const started = nats;
  const ownRedis = redis;
  return {
    natsUrl: o.natsUrl ?? started!.url,
    redisUrl: o.redisUrl ?? ownRedis!.testUrl,
    ...(started ? { nats: { url: started.url, users: started.users, testUser: started.testUser } } : {}),
    ...(ownRedis ? { redis: { testUrl: ownRedis.testUrl, urls: ownRedis.urls } } : {}),
    envOf: (service) => ({ ...started?.envOf(service), ...ownRedis?.envOf(service) }),
    servers: {
      ...(started ? { nats: { stop: (g?: number) => started.stop(g), start: () => started.start() } } : {}),
      ...(ownRedis
        ? { redis: { stop: (g?: number) => ownRedis.stop(g), start: () => ownRedis.start() } }
        : {}),
    },
    stop,
    abandon: () => {
      nats?.process.signal('SIGKILL');
      redis?.process.signal('SIGKILL');
    },
  };
}
