import { natsConfigShape } from '@custos/events';
import { baseConfigShape, databaseConfigShape, env, redisConnectionConfigShape } from '@custos/service-kit';
import { PLANS } from './plans/plan-fns.js';
import { tokenTrustConfigShape } from '@custos/auth';

/** Every environment variable the billing service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50058, metricsPort: 9468 }),
  ...databaseConfigShape,
  ...natsConfigShape,
  ...tokenTrustConfigShape,
  BILLING_DEFAULT_PLAN: env
    .oneOf(
      'Plan of an org that was never assigned one (its tier caps). Self-hosted installs default to enterprise (no caps).',
      PLANS,
    )
    .default('enterprise'),
  REDIS_URL: env.url('Redis URL; token revocations are read there.', ['redis', 'rediss']),
  ...redisConnectionConfigShape,
  IDENTITY_ADDR: env
    .address('host:port of the identity service (token signing keys).')
    .default('127.0.0.1:50051'),
  GRPC_DEADLINE_MS: env
    .int('Deadline of a call to a peer service, in milliseconds.', 100, 60000)
    .default(5000),
};
