import { tokenTrustConfigShape } from '@custos/auth';
import { natsConfigShape } from '@custos/events';
import { baseConfigShape, databaseConfigShape, env, redisConnectionConfigShape } from '@custos/service-kit';
import { mailConfigShape } from './notifications/mail-config.js';
import { SIGNUP_MODES } from './users/signup-mode-fns.js';

/** Every environment variable the identity service reads (see docs/configuration.md). */
export const configShape = {
  ...baseConfigShape({ grpcPort: 50051, metricsPort: 9461 }),
  ...databaseConfigShape,
  ...natsConfigShape,
  ...mailConfigShape,
  REDIS_URL: env.url('Redis URL; revocations are mirrored there for the gateway to check.', [
    'redis',
    'rediss',
  ]),
  ...redisConnectionConfigShape,
  POLICY_ADDR: env
    .address('host:port of the policy service (the grants behind agent token scopes).')
    .default('127.0.0.1:50053'),
  AGENT_SCOPES_CACHE_TTL_MS: env
    .int(
      "Longest an agent's grant scopes (its token's scopes and vault_ids) are reused between exchanges, in milliseconds (0: ask policy on every exchange). A grant change ends an org's cached scopes at once (its decision generation in Redis); scopes only pre-filter, every operation is still decided by policy.",
      0,
      600_000,
    )
    .default(5000),
  BILLING_ADDR: env.address('host:port of the billing service (tier caps).').default('127.0.0.1:50058'),
  VAULT_CRYPTO_ADDR: env
    .address('host:port of the vault-crypto service (the secret of an e-mailed share link, at send time).')
    .default('127.0.0.1:50052'),
  GRPC_DEADLINE_MS: env
    .int('Deadline of a call to a peer service, in milliseconds.', 100, 60000)
    .default(5000),
  ...tokenTrustConfigShape,
  TOKEN_SIGNING_KEK: env.base64Key(
    'Base64 of the 32-byte key that encrypts the token-signing private keys at rest. Keep it in a secret.',
  ),
  MFA_SECRET_KEY: env.base64Key(
    'Base64 of the 32-byte key that encrypts TOTP secrets at rest; separate from TOKEN_SIGNING_KEK. Keep it in a secret.',
  ),
  SIGNING_KEY_ROTATION_DAYS: env
    .int('Days a token-signing key signs before a new one replaces it.', 1, 3650)
    .default(90),
  ACCESS_TOKEN_TTL_SECONDS: env.int('Lifetime of a user access token, in seconds.', 60, 86400).default(900),
  REFRESH_TOKEN_TTL_SECONDS: env
    .int('Lifetime of a refresh token, in seconds.', 300, 31_536_000)
    .default(2_592_000),
  REFRESH_TOKEN_FAMILY_TTL_SECONDS: env
    .int(
      'Absolute lifetime of a session, in seconds: a refresh token rotates within its family (the tokens that descend from one sign-in) only this long after that sign-in; after it, refresh answers 401 and the user signs in again. No refresh token of the family is issued to outlive it.',
      3600,
      31_536_000,
    )
    .default(2_592_000),
  ARGON2_MEMORY_KIB: env
    .int(
      'Memory of an argon2id password hash, in KiB; at least 65536 (64 MiB). A stored hash made with less memory or fewer passes is rehashed at its next password sign-in.',
      65_536,
      4_194_304,
    )
    .default(65_536),
  ARGON2_TIME_COST: env.int('Passes of an argon2id password hash.', 1, 20).default(3),
  ARGON2_PARALLELISM: env.int('Lanes of an argon2id password hash.', 1, 16).default(1),
  SIGNUP_MODE: env
    .oneOf(
      'Who may create an account. `open`: anyone (signup, Google sign-in, invitations). `invite`: only through an org invitation, except the first account of an install, which may sign up. `closed`: no new account at all, invitations of new people included (existing accounts still sign in). The first account of an install becomes a platform admin when PLATFORM_ADMIN_EMAILS is empty. A refused signup answers 403 `signup_closed`.',
      SIGNUP_MODES,
    )
    .default('invite'),
  EMAIL_VERIFICATION_REQUIRED: env
    .bool('Whether a new account must verify its e-mail before signing in.')
    .default('true'),
  EMAIL_VERIFICATION_TTL_SECONDS: env
    .int('Lifetime of an e-mail verification link, in seconds.', 300, 604800)
    .default(86400),
  PLATFORM_ADMIN_EMAILS: env
    .list(
      'Comma-separated e-mail addresses of the platform admins: they may call `/v1/admin/*`, and ' +
        'their access tokens carry `platform_admin: true`. Empty: nobody is a platform admin.',
    )
    .transform((emails) => emails.map((e) => e.toLowerCase())),
  ORG_MAX_PENDING_INVITES: env
    .int('Most invitations an org may have pending (sent, not accepted, not expired) at once.', 1, 10000)
    .default(100),
  LOGIN_LOCKOUT_THRESHOLD: env
    .int(
      'Failed password sign-ins of one account, from any client address, within LOGIN_LOCKOUT_WINDOW_SECONDS that lock it (each is counted before its password is checked, so parallel guesses cannot exceed it). A locked account answers 429 `account_locked` even to its right password; a password reset unlocks it; the lockout is audited (`auth.account_locked`).',
      3,
      1000,
    )
    .default(10),
  LOGIN_LOCKOUT_WINDOW_SECONDS: env
    .int(
      'Window in which failed sign-ins of an account are counted towards a lockout, in seconds.',
      60,
      86400,
    )
    .default(900),
  LOGIN_LOCKOUT_SECONDS: env
    .int(
      'How long an account stays locked after LOGIN_LOCKOUT_THRESHOLD failed sign-ins, in seconds.',
      60,
      86400,
    )
    .default(900),
  LOGIN_DELAY_FREE_FAILURES: env
    .int(
      'Failed sign-ins of an account in the window answered without delay; the answers to further failures wait.',
      0,
      100,
    )
    .default(3),
  LOGIN_DELAY_BASE_MS: env
    .int(
      'Delay of the answer to the first delayed failed sign-in, in milliseconds; it doubles with each further failure.',
      0,
      10000,
    )
    .default(250),
  LOGIN_DELAY_MAX_MS: env
    .int(
      "Longest delay of the answer to a failed sign-in, in milliseconds; at most 4000, so that the delay and the password check stay within the gateway's GRPC_DEADLINE_MS (5000).",
      0,
      4000,
    )
    .default(2000),
  EXCHANGE_WRONG_SECRETS_PER_KEY_PER_MINUTE: env
    .int(
      'Wrong-secret exchanges of one agent key, router key or personal API key, from any client address, that are each refused with 401 and audited (`auth.login_failed`) in a minute. Further ones in that minute answer 429 and are not audited one by one: the first of them writes one `auth.exchange_refusals_limited` record. The right secret is never refused by this. Counted in Redis; without Redis every refusal is audited.',
      1,
      10_000,
    )
    .default(20),
  FEDERATION_RS256_PRIVATE_KEY_FILE: env
    .string(
      'Path of a PEM file holding the RSA private key (2048 bits or more) that signs federated tokens ' +
        '(`POST /v1/auth/federated-token`, RS256); its public key is published in the JWKS. Unset, ' +
        'with FEDERATION_RS256_PRIVATE_KEY unset too: the endpoint answers 503.',
    )
    .optional(),
  FEDERATION_RS256_PRIVATE_KEY: env
    .string('The same RSA private key as PEM text, instead of a file. Keep it in a secret.')
    .optional(),
  GOOGLE_CLIENT_IDS: env.list(
    'Comma-separated OAuth client ids whose Google ID tokens sign in (`POST /v1/auth/google`, the ' +
      '`aud` of the token). Empty: Google sign-in answers 503.',
  ),
  GOOGLE_JWKS_URL: env
    .url('Where Google publishes the keys that sign its ID tokens.', ['http', 'https'])
    .default('https://www.googleapis.com/oauth2/v3/certs'),
  GOOGLE_ISSUERS: env
    .list(
      'Comma-separated issuers (`iss`) accepted in Google ID tokens; empty means ' +
        '`accounts.google.com,https://accounts.google.com`.',
    )
    .transform((l) => (l.length > 0 ? l : ['accounts.google.com', 'https://accounts.google.com'])),
};
