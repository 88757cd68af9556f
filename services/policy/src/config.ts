import { natsConfigShape } from '@custos/events';
import { baseConfigShape, databaseConfigShape, env, redisConnectionConfigShape } from '@custos/service-kit';
import { tokenTrustConfigShape } from '@custos/auth';

/** Every environment variable the policy service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50053, metricsPort: 9463 }),
  ...databaseConfigShape,
  ...natsConfigShape,
  ...tokenTrustConfigShape,
  REDIS_URL: env.url(
    "Redis URL; token revocations are read there, and each org's decision generation is bumped there after a grant change.",
    ['redis', 'rediss'],
  ),
  ...redisConnectionConfigShape,
  IDENTITY_ADDR: env
    .address("host:port of the identity service (the keys that verify callers' tokens).")
    .default('127.0.0.1:50051'),
  GRPC_DEADLINE_MS: env
    .int('Deadline of a call to identity for its token keys, in milliseconds.', 100, 60000)
    .default(5000),
};
