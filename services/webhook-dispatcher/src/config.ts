import { natsConfigShape } from '@custos/events';
import {
  baseConfigShape,
  databaseConfigShape,
  env,
  normalizeCidr,
  redisConnectionConfigShape,
} from '@custos/service-kit';
import { tokenTrustConfigShape } from '@custos/auth';

const ALLOWED_CIDRS_DOC =
  'Comma-separated CIDRs of private networks webhooks may deliver to although they are loopback, ' +
  'private, link-local or otherwise internal (e.g. `10.20.0.0/16` for an in-cluster receiver). ' +
  'Empty (the default) allows public addresses only.';

/** Every environment variable the webhook-dispatcher service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50057, metricsPort: 9467 }),
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
  WEBHOOK_SECRET_KEY: env.base64Key(
    'Base64 of the 32-byte AES-256-GCM key that seals webhook signing secrets at rest. Keep it secret ' +
      'and stable: secrets sealed under one key open only with it (`openssl rand -base64 32`).',
  ),
  WEBHOOK_ALLOWED_CIDRS: env
    .list(ALLOWED_CIDRS_DOC)
    .refine((l) => l.every((c) => normalizeCidr(c) !== undefined), {
      message: 'expected comma-separated CIDRs such as 10.0.0.0/8 or fd00::/8',
    })
    .describe(ALLOWED_CIDRS_DOC),
  WEBHOOK_ALLOW_HTTP: env
    .bool('Accept plain `http:` webhook URLs; off by default, so deliveries are HTTPS only.')
    .default('false'),
  WEBHOOK_DNS_SERVERS: env.list(
    'Comma-separated DNS servers (`ip` or `ip:port`) used to resolve webhook hosts; empty uses the ' +
      'system resolver. Each delivery resolves the host once and connects to the checked address.',
  ),
  WEBHOOK_WORKER_INTERVAL_MS: env
    .int('How often the delivery worker looks for due deliveries, in milliseconds.', 10, 600000)
    .default(5000),
  WEBHOOK_RETRY_BASE_MS: env
    .int(
      'Wait before the first retry of a failed delivery, in milliseconds; retry n waits base × 4^(n-1), ±20 %.',
      10,
      3600000,
    )
    .default(5000),
  WEBHOOK_TIMEOUT_MS: env
    .int('Time a receiver has to answer a delivery with a 2xx, in milliseconds.', 100, 60000)
    .default(10000),
  WEBHOOK_CONCURRENCY: env.int('Deliveries sent at the same time by one replica.', 1, 256).default(16),
  WEBHOOK_ORG_CONCURRENCY: env
    .int(
      'Deliveries of one org in flight at once across all replicas, so that one org whose receivers ' +
        'hang cannot take every lane; raise it for a single-org install with many receivers.',
      1,
      10000,
    )
    .default(8),
  WEBHOOK_RETENTION_DAYS: env
    .int('Days a finished delivery and its attempts are kept before they are deleted.', 1, 3650)
    .default(30),
};
