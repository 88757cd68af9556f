import { tokenTrustConfigShape } from '@custos/auth';
import { baseConfigShape, env, redisConnectionConfigShape } from '@custos/service-kit';

/** The peer services the gateway calls, with the variable that gives each one's address. */
export const PEERS = [
  { name: 'identity', variable: 'IDENTITY_ADDR' },
  { name: 'vault-crypto', variable: 'VAULT_CRYPTO_ADDR' },
  { name: 'policy', variable: 'POLICY_ADDR' },
  { name: 'signer', variable: 'SIGNER_ADDR' },
  { name: 'approvals', variable: 'APPROVALS_ADDR' },
  { name: 'audit', variable: 'AUDIT_ADDR' },
  { name: 'webhook-dispatcher', variable: 'WEBHOOK_DISPATCHER_ADDR' },
  { name: 'billing', variable: 'BILLING_ADDR' },
] as const;

/** Every environment variable the gateway reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50050, metricsPort: 9460 }),
  ...tokenTrustConfigShape,
  HOST: env.string('Address the public HTTP server binds.').default('0.0.0.0'),
  PORT: env.port('Port of the public HTTP API.').default(8080),
  REDIS_URL: env.url('Redis URL for rate-limit counters.', ['redis', 'rediss']),
  ...redisConnectionConfigShape,
  RATE_LIMIT_RPS: env.int('Sustained requests per second allowed per client IP.', 1, 1_000_000).default(100),
  RATE_LIMIT_BURST: env.int('Burst size per client IP (token bucket capacity).', 1, 1_000_000).default(200),
  AUTH_RATE_LIMIT_PER_MINUTE: env
    .int(
      'Credential routes (sign-in, token refresh, signup, password reset, MFA, invitations; key exchanges with a malformed key) per minute per client IP. Key exchanges have their own limits (the EXCHANGE_RATE_LIMIT variables); each account also locks after LOGIN_LOCKOUT_THRESHOLD failed sign-ins (identity).',
      1,
      1_000_000,
    )
    .default(30),
  AUTH_RATE_LIMIT_BURST: env.int('Burst of credential exchanges per client IP.', 1, 1_000_000).default(10),
  EXCHANGE_RATE_LIMIT_PER_KEY_PER_MINUTE: env
    .int(
      'Exchanges of one key from one client IP for a token (`POST /v1/auth/agent-token` per agent or router key, `POST /v1/auth/api-key-token` per personal key) per minute; an agent exchanges once per token lifetime. Keyed by key and IP: the key id is not secret, so a bucket of the key alone could be emptied from anywhere. Never below AUTH_RATE_LIMIT_PER_MINUTE. A body with no well-formed key counts against AUTH_RATE_LIMIT_PER_MINUTE of its client IP instead.',
      1,
      1_000_000,
    )
    .default(60),
  EXCHANGE_RATE_LIMIT_PER_KEY_BURST: env
    .int('Burst of exchanges of one key. Never below AUTH_RATE_LIMIT_BURST.', 1, 1_000_000)
    .default(30),
  EXCHANGE_RATE_LIMIT_PER_IP_PER_MINUTE: env
    .int(
      'Key exchanges (agent-token, api-key-token) per minute per client IP, all keys together: a fleet of agents behind one NAT shares it (the default serves 100 agents exchanging 3 times each in 15 s). Never below AUTH_RATE_LIMIT_PER_MINUTE.',
      1,
      1_000_000,
    )
    .default(1200),
  EXCHANGE_RATE_LIMIT_PER_IP_BURST: env
    .int('Burst of key exchanges per client IP. Never below AUTH_RATE_LIMIT_BURST.', 1, 1_000_000)
    .default(600),
  TRUSTED_PROXIES: env.list(
    'Comma-separated CIDRs of reverse proxies whose X-Forwarded-For is believed; empty trusts none.',
  ),
  GRPC_DEADLINE_MS: env
    .int('Deadline of a call to a peer service, in milliseconds.', 50, 120000)
    .default(5000),
  IP_RULES_CACHE_TTL_MS: env
    .int(
      "How long the gateway keeps an org's IP rules before asking the policy service again, in milliseconds; a new or deleted rule takes effect within this time (at once on the replica that changed it).",
      0,
      300000,
    )
    .default(5000),
  HEALTH_TIMEOUT_MS: env
    .int('Deadline of each peer health check behind GET /v1/health, in milliseconds.', 50, 30000)
    .default(2000),
  IDENTITY_ADDR: env.address('host:port of the identity service.').default('127.0.0.1:50051'),
  VAULT_CRYPTO_ADDR: env.address('host:port of the vault-crypto service.').default('127.0.0.1:50052'),
  POLICY_ADDR: env.address('host:port of the policy service.').default('127.0.0.1:50053'),
  SIGNER_ADDR: env.address('host:port of the signer service.').default('127.0.0.1:50054'),
  APPROVALS_ADDR: env.address('host:port of the approvals service.').default('127.0.0.1:50055'),
  CUSTODY_REGION_HEADER: env
    .string(
      "A trusted ingress header holding the client's country (ISO 3166-1 alpha-2, e.g. `cf-ipcountry`); its value goes to signer " +
        "for custody geofencing when signer's CUSTODY_REGION_SOURCE is `header`. Set it only behind an ingress that always overwrites the header.",
    )
    .optional(),
  AUDIT_ADDR: env.address('host:port of the audit service.').default('127.0.0.1:50056'),
  WEBHOOK_DISPATCHER_ADDR: env
    .address('host:port of the webhook-dispatcher service.')
    .default('127.0.0.1:50057'),
  BILLING_ADDR: env.address('host:port of the billing service.').default('127.0.0.1:50058'),
};
