import { tokenTrustConfigShape } from '@custos/auth';
import { natsConfigShape } from '@custos/events';
import { baseConfigShape, databaseConfigShape, env, redisConnectionConfigShape } from '@custos/service-kit';

/** Every environment variable the approvals service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50055, metricsPort: 9465 }),
  ...databaseConfigShape,
  ...natsConfigShape,
  ...tokenTrustConfigShape,
  REDIS_URL: env.url('Redis URL; token revocations are read there.', ['redis', 'rediss']),
  ...redisConnectionConfigShape,
  IDENTITY_ADDR: env
    .address(
      "host:port of the identity service (the keys that verify callers' tokens, agents' approval policies, step-up checks).",
    )
    .default('127.0.0.1:50051'),
  GRPC_DEADLINE_MS: env.int('Deadline of a call to identity, in milliseconds.', 100, 60000).default(5000),
  APPROVAL_TTL_SECONDS: env
    .int(
      'How long an approval stays open (to be decided, then used) when the rule that asked for it sets no expiry_secs, in seconds.',
      60,
      30 * 86400,
    )
    .default(86400),
  APPROVAL_SWEEP_INTERVAL_MS: env
    .int(
      'Pause between rounds of the sweeper that marks approvals past their expiry `expired`, in milliseconds.',
      100,
      3_600_000,
    )
    .default(30000),
  APPROVAL_SWEEP_BATCH: env
    .int('Most approvals the expiry sweeper ends in one transaction.', 1, 10000)
    .default(200),
};
