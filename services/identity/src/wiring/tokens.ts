import { Redis } from 'ioredis';
import { TokenVerifier, redisAnswers, redisRevocationCheck } from '@custos/auth';
import {
  type ConfigOf,
  type Database,
  type Runtime,
  describeError,
  redisConnectionOptions,
} from '@custos/service-kit';
import type { configShape } from '../config.js';
import { WrongSecretBucket } from '../credentials/wrong-secret-bucket.js';
import { localKeySource } from '../tokens/local-keys.js';
import { RevocationStore } from '../tokens/revocation-store.js';
import { SigningKeyRing } from '../tokens/signing-key-store.js';
import { TokenIssuer, type TokenSettings } from '../tokens/token-issuer.js';

const DAY_MS = 86_400_000;
/** The longest lifetime any Custos token can have (agent tokens are capped at a day). */
const MAX_TOKEN_TTL_MS = DAY_MS;

/** Identity's token slice: the signing key ring, revocations, and the issuer and verifier. */
export interface Tokens {
  /** Wrong secrets sent per exchange key (their audit records are bounded per minute). */
  wrongSecrets: WrongSecretBucket;
  ring: SigningKeyRing;
  revocations: RevocationStore;
  issuer: TokenIssuer;
  verifier: TokenVerifier;
  settings: TokenSettings;
  /** Identity's Redis connection (revocations; the agent-scopes cache reads decision generations). */
  redis: Redis;
}

/**
 * Builds the token slice: loads (or creates) the signing keys, re-seeds Redis with the live
 * revocations, and every minute picks up keys rotated by another replica and re-seeds Redis again.
 */
export async function buildTokens(rt: Runtime<ConfigOf<typeof configShape>>, db: Database): Promise<Tokens> {
  const c = rt.config;
  const redis = new Redis(c.REDIS_URL, {
    maxRetriesPerRequest: 1,
    commandTimeout: 2000,
    lazyConnect: true,
    ...redisConnectionOptions(c),
  });
  redis.on('error', (err) => rt.logger.warn({ err: describeError(err) }, 'redis error'));
  rt.onShutdown('redis', async () => {
    redis.disconnect();
  });
  // Every (re)connection republishes the revocations (set below, once the store exists): a Redis
  // that restarted empty (it keeps nothing on disk) gets them back at once, and verifiers refuse
  // tokens (503) until the published marker is there again (REVOCATIONS_PUBLISHED_KEY).
  const onReady: { republish?: () => void } = {};
  redis.on('ready', () => onReady.republish?.());
  await redis
    .connect()
    .catch((err: unknown) => rt.logger.warn({ err: describeError(err) }, 'redis unreachable at start'));

  const ring = new SigningKeyRing(
    db,
    {
      kek: c.TOKEN_SIGNING_KEK,
      rotationMs: c.SIGNING_KEY_ROTATION_DAYS * DAY_MS,
      retiredKeyTtlMs: MAX_TOKEN_TTL_MS,
    },
    rt.logger,
  );
  await ring.refresh();
  const revocations = new RevocationStore(db, redis, rt.logger);
  const republish = () =>
    revocations
      .republish()
      .catch((err: unknown) => rt.logger.warn({ err: describeError(err) }, 'revocations not republished'));
  onReady.republish = () => {
    rt.logger.info('redis (re)connected; republishing revocations');
    void republish();
  };
  await republish();
  rt.dependencies.add({ name: 'redis', required: false, check: () => redisAnswers(redis) });
  const timer = setInterval(() => {
    ring
      .refresh()
      .catch((err: unknown) => rt.logger.error({ err: describeError(err) }, 'signing key refresh failed'));
    void republish();
  }, 60_000);
  timer.unref();
  rt.onShutdown('timers', async () => clearInterval(timer));

  const settings: TokenSettings = {
    issuers: [c.TOKEN_ISSUER, ...c.TOKEN_LEGACY_ISSUERS],
    audience: c.TOKEN_AUDIENCE,
    userAccessTtlSeconds: c.ACCESS_TOKEN_TTL_SECONDS,
    platformAdminEmails: c.PLATFORM_ADMIN_EMAILS,
  };
  const verifier = new TokenVerifier({
    keys: localKeySource(ring),
    issuers: settings.issuers,
    audience: settings.audience,
    isRevoked: redisRevocationCheck(redis, {
      requirePublished: true,
      outcomes: rt.metrics.tokenRevocationChecks,
    }),
  });
  const wrongSecrets = new WrongSecretBucket(redis, c.EXCHANGE_WRONG_SECRETS_PER_KEY_PER_MINUTE, rt.logger);
  return {
    ring,
    revocations,
    issuer: new TokenIssuer(ring, settings),
    verifier,
    settings,
    redis,
    wrongSecrets,
  };
}
