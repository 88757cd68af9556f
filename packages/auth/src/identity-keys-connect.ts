import { Redis, type RedisOptions } from 'ioredis';
import { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import {
  type DependencyHealth,
  type Logger,
  type MeshTls,
  type Runtime,
  createGrpcClient,
  describeError,
  type RedisConnectionSettings,
  redisConnectionOptions,
} from '@custos/service-kit';
import { IdentityKeys, type TokenTrust } from './identity-keys.js';
import { type RevocationCheckOptions, redisAnswers } from './revocation.js';
import { tokenTrustOf } from './token-config.js';

/** What a service behind the gateway needs to verify the caller's token itself. */
export interface IdentityKeysSettings {
  /** Redis of the revocations identity mirrors. */
  redisUrl: string;
  /** CA of a `rediss://` server's certificate and Redis Sentinel (REDIS_TLS_CA_FILE, REDIS_SENTINEL*). */
  redisConnection?: RedisConnectionSettings;
  /** host:port of the identity service (its JWKS). */
  identityAddr: string;
  /** Deadline of a call to identity, in milliseconds. */
  deadlineMs: number;
  /** This service's mesh certificates (`rt.tls`): identity is reached over mTLS and must prove it is identity. */
  tls: MeshTls;
  /** Accepted issuers and audience: the service's own configuration (tokenTrustOf). */
  trust: TokenTrust;
  /** Counts revocation checks by outcome (the runtime's `metrics.tokenRevocationChecks`). */
  revocationOutcomes?: RevocationCheckOptions['outcomes'];
}

/**
 * Options of a verifying service's Redis client. Auto-pipelining: the revocation MGETs of the calls
 * a service handles in one event-loop turn leave in one write and come back in one read; each check
 * still sends its own MGET when its call asks, so a revocation stored before the check is seen.
 * `conn`: the CA and Redis Sentinel settings (redisConnectionOptions).
 */
export function verifierRedisOptions(url: string, conn: RedisConnectionSettings = {}): RedisOptions {
  return {
    maxRetriesPerRequest: 1,
    // A Redis that does not answer fails the check (503) in 2 s rather than holding the request.
    commandTimeout: 2000,
    enableAutoPipelining: true,
    lazyConnect: true,
    ...redisConnectionOptions({ ...conn, REDIS_URL: url }),
  };
}

/**
 * Connects a service to identity's keys and Redis's revocations, and registers their shutdown.
 * Redis not answering at start only logs: verification fails closed (503) until it answers.
 */
export async function connectIdentityKeys(
  s: IdentityKeysSettings,
  logger: Logger,
  onShutdown: (name: string, fn: () => Promise<void>) => void,
  dependencies?: Pick<DependencyHealth, 'add'>,
): Promise<IdentityKeys> {
  const redis = new Redis(s.redisUrl, verifierRedisOptions(s.redisUrl, s.redisConnection));
  redis.on('error', (err) => logger.warn({ err: describeError(err) }, 'redis error'));
  // Reported, not required: while Redis is away revocation checks fail closed (503) on their own.
  dependencies?.add({ name: 'redis', required: false, check: () => redisAnswers(redis) });
  onShutdown('redis', async () => {
    redis.disconnect();
  });
  await redis
    .connect()
    .catch((err: unknown) => logger.warn({ err: describeError(err) }, 'redis unreachable at start'));
  const identity = createGrpcClient(IdentityServiceClient, s.identityAddr, {
    tls: s.tls,
    peer: 'identity',
    deadlineMs: s.deadlineMs,
  });
  onShutdown('identity-client', async () => {
    identity.close();
  });
  return IdentityKeys.overGrpc(identity, redis, logger, s.trust, {
    requirePublished: true,
    ...(s.revocationOutcomes ? { outcomes: s.revocationOutcomes } : {}),
  });
}

/** The configuration a service behind the gateway verifies tokens with (its config.ts has these). */
export interface IdentityKeysConfig extends RedisConnectionSettings {
  REDIS_URL: string;
  IDENTITY_ADDR: string;
  GRPC_DEADLINE_MS: number;
  TOKEN_ISSUER: string;
  TOKEN_LEGACY_ISSUERS: string[];
  TOKEN_AUDIENCE: string;
}

/**
 * connectIdentityKeys for a service's runtime: its Redis, identity's address, its mesh
 * certificate, and the audience of tokens minted for it alone (`<TOKEN_AUDIENCE>:<rt.name>`).
 */
export function connectServiceIdentityKeys(rt: Runtime<IdentityKeysConfig>): Promise<IdentityKeys> {
  const c = rt.config;
  return connectIdentityKeys(
    {
      redisUrl: c.REDIS_URL,
      redisConnection: c,
      identityAddr: c.IDENTITY_ADDR,
      deadlineMs: c.GRPC_DEADLINE_MS,
      trust: tokenTrustOf(c, rt.name),
      tls: rt.tls,
      revocationOutcomes: rt.metrics.tokenRevocationChecks,
    },
    rt.logger,
    rt.onShutdown,
    rt.dependencies,
  );
}
