import { randomBytes } from 'node:crypto';
import type { MeshPorts } from './ports';
import { SERVICES, addrVar, type ServiceName } from './services';

/**
 * What a mesh is for. `dev`: a person's machine (`pnpm dev`), webhooks may reach a local receiver
 * over plain HTTP. `test`: the end-to-end tests, which sign in far more often than a person and
 * stop services quickly. `bench`: the benchmark, which drives the mesh from one address as hard as
 * it can.
 */
export type MeshProfile = 'dev' | 'test' | 'bench';

/** The six 32-byte keys (base64) every mesh needs. */
export interface MeshKeys {
  /** LOCAL_KMS_MASTER_KEY: the local KMS provider's master key. */
  kmsMasterKey: string;
  /** TOKEN_SIGNING_KEK: wraps identity's token-signing keys. */
  tokenSigningKek: string;
  /** AUDIT_HMAC_KEY: keys the audit hash chain. */
  auditHmacKey: string;
  /** AUDIT_CHECKPOINT_SIGNING_KEY: the Ed25519 seed that signs audit checkpoints. */
  auditCheckpointSigningKey: string;
  /** WEBHOOK_SECRET_KEY: seals webhook secrets. */
  webhookSecretKey: string;
  /** MFA_SECRET_KEY: seals TOTP secrets. */
  mfaSecretKey: string;
}

/** Fresh random keys (a mesh whose data lives no longer than it does). */
export function randomMeshKeys(): MeshKeys {
  const key = () => randomBytes(32).toString('base64');
  return {
    kmsMasterKey: key(),
    tokenSigningKek: key(),
    auditHmacKey: key(),
    auditCheckpointSigningKey: key(),
    webhookSecretKey: key(),
    mfaSecretKey: key(),
  };
}

/**
 * Settings of each profile that the caller's environment may override (dev mode passes its
 * environment through; tests and the benchmark pass only PATH).
 */
export const PROFILE_DEFAULTS: Readonly<Record<MeshProfile, Readonly<Record<string, string>>>> = {
  dev: {
    LOG_LEVEL: 'info',
    KMS_PROVIDER: 'local',
    // The local KMS keeps its master key beside the data: allowed on a developer's machine only.
    KMS_ALLOW_LOCAL: 'true',
    // Dev mode may deliver to a receiver on this machine over plain HTTP; production may not.
    WEBHOOK_ALLOW_HTTP: 'true',
    WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32,::1/128',
    // Anyone on this machine may sign up (identity's own default is `invite` after the first account).
    SIGNUP_MODE: 'open',
  },
  test: {
    LOG_LEVEL: 'info',
    KMS_PROVIDER: 'local',
    KMS_ALLOW_LOCAL: 'true',
    SHUTDOWN_GRACE_MS: '2000',
    // Several meshes run at once in a test run (the shared ones and a private one per worker): half
    // the default pool keeps them, and the tests beside them, under Postgres' 100 connections.
    DATABASE_POOL_MAX: '5',
    // Tests sign in far more often than a person; the auth limit has its own gateway test.
    AUTH_RATE_LIMIT_PER_MINUTE: '1000000',
    AUTH_RATE_LIMIT_BURST: '1000000',
    // Every spec on the shared mesh calls from 127.0.0.1, two workers at once: the general
    // per-address limit (100/s, burst 200) would answer 429 to one spec's burst of 200 concurrent
    // reads because of its neighbour's traffic. account-protection.spec sets the defaults back.
    RATE_LIMIT_RPS: '1000000',
    RATE_LIMIT_BURST: '1000000',
    // Every spec signs up its own users; the signup modes have their own spec with a private mesh.
    SIGNUP_MODE: 'open',
    // The USD caps' static prices (docs/guardrails.md): anvil's ETH at $2,000.
    PRICE_TABLE_USD: 'ETH=2000,USDC=1',
    // An approval past its expiry is marked `expired` within a second, not half a minute (the e2e
    // expiry test waits for it).
    APPROVAL_SWEEP_INTERVAL_MS: '1000',
  },
  bench: {
    LOG_LEVEL: 'info',
    KMS_PROVIDER: 'local',
    KMS_ALLOW_LOCAL: 'true',
    SHUTDOWN_GRACE_MS: '2000',
    // The benchmark signs up its own users and sends all load from one client IP: the limiters
    // still run on every request, they just never say no.
    EMAIL_VERIFICATION_REQUIRED: 'false',
    SIGNUP_MODE: 'open',
    RATE_LIMIT_RPS: '1000000',
    RATE_LIMIT_BURST: '1000000',
    AUTH_RATE_LIMIT_PER_MINUTE: '1000000',
    AUTH_RATE_LIMIT_BURST: '1000000',
  },
};

/** Everything that decides a mesh's environment. */
export interface MeshEnvOptions {
  profile: MeshProfile;
  ports: MeshPorts;
  databaseUrl: string;
  natsUrl: string;
  /** The JetStream stream and subject prefix: each mesh has its own, so meshes on one NATS never collide. */
  natsStream: string;
  natsSubjectPrefix: string;
  redisUrl: string;
  keys: MeshKeys;
  /** Where dev-mode e-mail is written (MAIL_DIR). */
  mailDir: string;
  /** The mesh CA every service trusts (GRPC_TLS_CA_FILE; each service's own pair comes with serviceEnv). */
  tlsCaFile?: string;
  /** The caller's environment, over the profile's defaults (dev: process.env; otherwise PATH only). */
  baseEnv?: Readonly<Record<string, string | undefined>>;
  /** The last word, over everything (a test's own settings). */
  extraEnv?: Readonly<Record<string, string>>;
}

/**
 * The variables every service of the mesh gets: the profile's defaults, then the caller's
 * environment, then the wiring (loopback hosts, ports, infrastructure, keys, every `<NAME>_ADDR`),
 * then `extraEnv`. `serviceEnv` adds a service's own GRPC_PORT and METRICS_PORT.
 */
export function meshEnv(o: MeshEnvOptions): Record<string, string> {
  const env: Record<string, string> = { ...PROFILE_DEFAULTS[o.profile] };
  for (const [k, v] of Object.entries(o.baseEnv ?? {})) if (v !== undefined) env[k] = v;
  Object.assign(env, {
    GRPC_HOST: '127.0.0.1',
    METRICS_HOST: '127.0.0.1',
    HOST: '127.0.0.1',
    PORT: String(o.ports.http),
    // The owner's URL: what the migrations and the tests' own SQL use. Each service gets its own
    // role's URL instead (serviceEnv with migrateMesh's `envOf`), and the gateway none.
    DATABASE_URL: o.databaseUrl,
    NATS_URL: o.natsUrl,
    NATS_STREAM: o.natsStream,
    NATS_SUBJECT_PREFIX: o.natsSubjectPrefix,
    REDIS_URL: o.redisUrl,
    LOCAL_KMS_MASTER_KEY: o.keys.kmsMasterKey,
    TOKEN_SIGNING_KEK: o.keys.tokenSigningKek,
    AUDIT_HMAC_KEY: o.keys.auditHmacKey,
    // Dev mode's keys (tools/dev, plain JS) may lack it: the caller's own setting then stays.
    ...(o.keys.auditCheckpointSigningKey
      ? { AUDIT_CHECKPOINT_SIGNING_KEY: o.keys.auditCheckpointSigningKey }
      : {}),
    WEBHOOK_SECRET_KEY: o.keys.webhookSecretKey,
    MFA_SECRET_KEY: o.keys.mfaSecretKey,
    MAIL_DIR: o.mailDir,
    ...(o.tlsCaFile ? { GRPC_TLS_CA_FILE: o.tlsCaFile } : {}),
  });
  for (const s of SERVICES) env[addrVar(s)] = `127.0.0.1:${o.ports.grpc[s]}`;
  return { ...env, ...o.extraEnv };
}

/**
 * The environment of one service: the mesh's, then `own` (its own settings, e.g. the DATABASE_URL
 * of its role; `undefined` removes a variable it must not get), plus its own gRPC and metrics ports.
 */
export function serviceEnv(
  common: Readonly<Record<string, string>>,
  ports: MeshPorts,
  service: ServiceName,
  own: Readonly<Record<string, string | undefined>> = {},
): Record<string, string> {
  const env: Record<string, string> = { ...common };
  for (const [k, v] of Object.entries(own)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return { ...env, GRPC_PORT: String(ports.grpc[service]), METRICS_PORT: String(ports.metrics[service]) };
}

/** A stream name and subject prefix no other mesh uses: `E2E_1A2B3C4D` and `e2e.e2e_1a2b3c4d`. */
export function uniqueNatsNames(prefix: string): { natsStream: string; natsSubjectPrefix: string } {
  const stream = `${prefix.toUpperCase()}_${randomBytes(4).toString('hex').toUpperCase()}`;
  return { natsStream: stream, natsSubjectPrefix: `${prefix.toLowerCase()}.${stream.toLowerCase()}` };
}
