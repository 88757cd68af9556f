import { natsConfigShape } from '@custos/events';
import { baseConfigShape, databaseConfigShape, env, redisTlsConfigShape } from '@custos/service-kit';
import { tokenTrustConfigShape } from '@custos/auth';

/** Every environment variable the audit service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50056, metricsPort: 9466 }),
  ...databaseConfigShape,
  ...natsConfigShape,
  ...tokenTrustConfigShape,
  REDIS_URL: env.url('Redis URL; token revocations are read there.', ['redis', 'rediss']),
  ...redisTlsConfigShape,
  IDENTITY_ADDR: env
    .address('host:port of the identity service (token signing keys).')
    .default('127.0.0.1:50051'),
  GRPC_DEADLINE_MS: env
    .int('Deadline of a call to a peer service, in milliseconds.', 100, 60000)
    .default(5000),
  AUDIT_HMAC_KEY: env.base64Key(
    'Base64 of the 32-byte HMAC-SHA256 key that chains audit records (DECISIONS.md: audit). Keep it ' +
      'secret and stable: records chained under one key verify only with it (`openssl rand -base64 32`).',
  ),
};
