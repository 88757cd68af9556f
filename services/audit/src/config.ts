import { natsConfigShape } from '@custos/events';
import { baseConfigShape, databaseConfigShape, env, redisConnectionConfigShape } from '@custos/service-kit';
import { tokenTrustConfigShape } from '@custos/auth';

/** Every environment variable the audit service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50056, metricsPort: 9466 }),
  ...databaseConfigShape,
  ...natsConfigShape,
  ...tokenTrustConfigShape,
  REDIS_URL: env.url('Redis URL; token revocations are read there.', ['redis', 'rediss']),
  ...redisConnectionConfigShape,
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
  AUDIT_CHECKPOINT_SIGNING_KEY: env
    .string(
      'Ed25519 key that signs checkpoints of each org chain head (docs/security.md: audit checkpoints): ' +
        'base64 of a 32-byte seed (`openssl rand -base64 32`) or a PKCS#8 PEM private key. Separate from ' +
        'AUDIT_HMAC_KEY; its public key is published with the checkpoints. When unset, no checkpoints ' +
        'are signed and the checkpoint endpoints answer 503.',
    )
    .optional(),
  AUDIT_CHECKPOINT_INTERVAL_MS: env
    .int(
      'How often each org whose chain head moved since its last checkpoint gets a new signed checkpoint, ' +
        'in milliseconds; 0 signs only on demand (POST /v1/audit/checkpoints).',
      0,
      7 * 24 * 3600 * 1000,
    )
    .default(3600000),
};
