import { natsConfigShape } from '@custos/events';
import { baseConfigShape, databaseConfigShape, env, redisConnectionConfigShape } from '@custos/service-kit';
import { kmsConfigShape } from './kms/kms-config.js';
import { tokenTrustConfigShape } from '@custos/auth';

/** Every environment variable the vault-crypto service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50052, metricsPort: 9462 }),
  ...databaseConfigShape,
  ...natsConfigShape,
  ...tokenTrustConfigShape,
  ...kmsConfigShape,
  REDIS_URL: env.url(
    "Redis URL; token revocations are read there, and each org's decision generation (see POLICY_DECISION_CACHE_TTL_MS).",
    ['redis', 'rediss'],
  ),
  ...redisConnectionConfigShape,
  IDENTITY_ADDR: env
    .address('host:port of the identity service (token signing keys).')
    .default('127.0.0.1:50051'),
  POLICY_ADDR: env.address('host:port of the policy service (access decisions).').default('127.0.0.1:50053'),
  BILLING_ADDR: env.address('host:port of the billing service (tier caps).').default('127.0.0.1:50058'),
  GRPC_DEADLINE_MS: env
    .int('Deadline of a call to a peer service, in milliseconds.', 100, 60000)
    .default(5000),
  ORG_KEY_ROTATION_DAYS: env
    .int('Days an org key-encryption key wraps new data keys before a new version replaces it.', 1, 3650)
    .default(365),
  POLICY_DECISION_CACHE_TTL_MS: env
    .int(
      "Longest a policy decision is reused, in milliseconds (0: ask policy on every operation). A grant change ends an org's cached decisions at once (its decision generation in Redis); this bounds how long one could outlive a change whose generation bump failed.",
      0,
      600_000,
    )
    .default(5000),
  POLICY_DECISION_CACHE_SIZE: env
    .int('Most policy decisions kept in memory (LRU).', 0, 1_000_000)
    .default(10_000),
  DATA_KEY_CACHE_SIZE: env.int('Most unwrapped keys kept in memory (LRU).', 0, 1_000_000).default(5000),
  DATA_KEY_CACHE_TTL_SECONDS: env
    .int('Seconds an unwrapped key stays in the memory cache.', 0, 86400)
    .default(300),
};
