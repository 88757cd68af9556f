import { meshEnv, randomMeshKeys, serviceEnv, uniqueNatsNames } from './env';
import { defaultPorts } from './ports';
import { SERVICES, addrVar } from './services';
import { restartDelay } from './supervisor';

const base = {
  ports: defaultPorts(8080),
  databaseUrl: 'postgres://u@127.0.0.1:5432/db',
  natsUrl: 'nats://127.0.0.1:4222',
  natsStream: 'S',
  natsSubjectPrefix: 's',
  redisUrl: 'redis://127.0.0.1:6379',
  keys: randomMeshKeys(),
  mailDir: '/tmp/mail',
};

describe('randomMeshKeys', () => {
  it('gives six distinct 32-byte keys, the audit checkpoint key apart from the HMAC key', () => {
    const keys = Object.values(randomMeshKeys());
    expect(keys).toHaveLength(6);
    for (const k of keys) expect(Buffer.from(k, 'base64')).toHaveLength(32);
    expect(new Set(keys).size).toBe(6);
  });
});

describe('meshEnv', () => {
  it("keeps the caller's AUDIT_CHECKPOINT_SIGNING_KEY when the keys have none (dev mode's older key set)", () => {
    const keys = { ...base.keys, auditCheckpointSigningKey: undefined as unknown as string };
    const env = meshEnv({ ...base, keys, profile: 'dev', baseEnv: { AUDIT_CHECKPOINT_SIGNING_KEY: 'mine' } });
    expect(env['AUDIT_CHECKPOINT_SIGNING_KEY']).toBe('mine');
    expect(meshEnv({ ...base, keys, profile: 'test' })).not.toHaveProperty('AUDIT_CHECKPOINT_SIGNING_KEY');
  });

  it('gives every service the wiring and every address, and each its own ports', () => {
    const env = meshEnv({ ...base, profile: 'test' });
    expect(env).toMatchObject({
      HOST: '127.0.0.1',
      PORT: '8080',
      DATABASE_URL: base.databaseUrl,
      NATS_STREAM: 'S',
      LOCAL_KMS_MASTER_KEY: base.keys.kmsMasterKey,
      AUDIT_HMAC_KEY: base.keys.auditHmacKey,
      AUDIT_CHECKPOINT_SIGNING_KEY: base.keys.auditCheckpointSigningKey,
      SHUTDOWN_GRACE_MS: '2000',
    });
    for (const s of SERVICES) expect(env[addrVar(s)]).toMatch(/^127\.0\.0\.1:500[5-9]\d$/);
    expect(env['VAULT_CRYPTO_ADDR']).toBe('127.0.0.1:50052');
    expect(serviceEnv(env, base.ports, 'billing')).toMatchObject({
      GRPC_PORT: '50058',
      METRICS_PORT: '9468',
    });
    expect(env).not.toHaveProperty('MIGRATE_ON_START');
    const own = serviceEnv(env, base.ports, 'billing', { DATABASE_URL: 'postgres://custos_billing@h/db' });
    expect(own['DATABASE_URL']).toBe('postgres://custos_billing@h/db');
    expect(serviceEnv(env, base.ports, 'gateway', { DATABASE_URL: undefined })).not.toHaveProperty(
      'DATABASE_URL',
    );
  });

  it('lets the caller override profile defaults but not the wiring; extraEnv has the last word', () => {
    const env = meshEnv({
      ...base,
      profile: 'dev',
      baseEnv: {
        LOG_LEVEL: 'debug',
        WEBHOOK_ALLOW_HTTP: 'false',
        PORT: '1',
        DATABASE_URL: 'x',
        UNSET: undefined,
      },
      extraEnv: { DATABASE_URL: 'postgres://other' },
    });
    expect(env['LOG_LEVEL']).toBe('debug');
    expect(env['WEBHOOK_ALLOW_HTTP']).toBe('false');
    expect(env['WEBHOOK_ALLOWED_CIDRS']).toBe('127.0.0.1/32,::1/128');
    expect(env['PORT']).toBe('8080');
    expect(env['DATABASE_URL']).toBe('postgres://other');
    expect(env).not.toHaveProperty('UNSET');
  });

  it('keeps profiles apart: only dev lets webhooks use plain HTTP; bench and test lift the per-IP limits, not dev', () => {
    const dev = meshEnv({ ...base, profile: 'dev' });
    const test = meshEnv({ ...base, profile: 'test' });
    const bench = meshEnv({ ...base, profile: 'bench' });
    expect(dev['WEBHOOK_ALLOW_HTTP']).toBe('true');
    expect(test).not.toHaveProperty('WEBHOOK_ALLOW_HTTP');
    expect(bench['RATE_LIMIT_RPS']).toBe('1000000');
    // Every spec on a shared mesh calls from 127.0.0.1: account-protection sets the defaults back.
    expect(test['RATE_LIMIT_RPS']).toBe('1000000');
    expect(dev).not.toHaveProperty('RATE_LIMIT_RPS');
    expect(dev).not.toHaveProperty('EMAIL_VERIFICATION_REQUIRED');
  });
});

describe('uniqueNatsNames', () => {
  it('names a stream and subject prefix of its own', () => {
    const a = uniqueNatsNames('e2e');
    expect(a.natsStream).toMatch(/^E2E_[0-9A-F]{8}$/);
    expect(a.natsSubjectPrefix).toBe(`e2e.${a.natsStream.toLowerCase()}`);
    expect(uniqueNatsNames('e2e').natsStream).not.toBe(a.natsStream);
  });
});

describe('restartDelay', () => {
  it('doubles from the initial delay and stops at the cap', () => {
    const policy = { initialDelayMs: 1000, maxDelayMs: 30_000, resetAfterMs: 60_000 };
    expect([0, 1, 2, 3, 4, 5, 6, 50].map((n) => restartDelay(n, policy))).toEqual([
      1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000,
    ]);
  });
});
