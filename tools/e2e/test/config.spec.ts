import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { meshCertFiles, writeTestMeshCerts } from '@custos/testing';
import { SERVICES } from '../src/mesh';

const REPO = path.resolve(__dirname, '..', '..', '..');

// Every service gets real mesh certificates (its own, unless a test says otherwise): they are read
// at start, before anything that could fail on a variable under test.
const certDir = fs.mkdtempSync(path.join(os.tmpdir(), 'custos-config-test-'));
beforeAll(() => writeTestMeshCerts(certDir, SERVICES));
afterAll(() => fs.rmSync(certDir, { recursive: true, force: true }));

function tlsEnv(service: string): Record<string, string> {
  const f = meshCertFiles(certDir, service);
  return { GRPC_TLS_CA_FILE: f.caFile, GRPC_TLS_CERT_FILE: f.certFile, GRPC_TLS_KEY_FILE: f.keyFile };
}

function start(service: string, env: Record<string, string>) {
  return spawnSync(process.execPath, [path.join(REPO, 'services', service, 'dist', 'main.js')], {
    env: { PATH: process.env.PATH ?? '', ...tlsEnv(service), ...env },
    encoding: 'utf8',
    timeout: 20000,
  });
}

const VALID = {
  // A free metrics port: dev mode (readme.spec, in the other worker) may hold the default ones.
  METRICS_PORT: '0',
  DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/postgres',
  NATS_URL: 'nats://127.0.0.1:4222',
  REDIS_URL: 'redis://127.0.0.1:6379',
  KMS_PROVIDER: 'local',
  KMS_ALLOW_LOCAL: 'true',
  MFA_SECRET_KEY: Buffer.alloc(32, 5).toString('base64'),
  LOCAL_KMS_MASTER_KEY: Buffer.alloc(32, 7).toString('base64'),
  TOKEN_SIGNING_KEK: Buffer.alloc(32, 9).toString('base64'),
  AUDIT_HMAC_KEY: Buffer.alloc(32, 7).toString('base64'),
  WEBHOOK_SECRET_KEY: Buffer.alloc(32, 9).toString('base64'),
  MAIL_DIR: '/tmp',
};

describe('bad configuration stops a service at start with one line naming the variable', () => {
  it('vault-crypto refuses the local KMS unless KMS_ALLOW_LOCAL=true', () => {
    const env: Record<string, string> = { ...VALID };
    delete env.KMS_ALLOW_LOCAL;
    const r = start('vault-crypto', env);
    expect(r.status).toBe(78);
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(
        /^custos-vault-crypto: invalid configuration: KMS_PROVIDER: local .*development only/,
      ),
    ]);
  });

  const required: Record<string, string> = {
    gateway: 'REDIS_URL',
    identity: 'DATABASE_URL',
    'vault-crypto': 'KMS_PROVIDER',
    policy: 'NATS_URL',
    signer: 'DATABASE_URL',
    approvals: 'NATS_URL',
    audit: 'DATABASE_URL',
    'webhook-dispatcher': 'NATS_URL',
    billing: 'DATABASE_URL',
  };

  it.each(SERVICES.map((s) => [s, required[s]!]))('%s without %s', (service, variable) => {
    const env: Record<string, string> = { ...VALID };
    delete env[variable];
    const r = start(service, env);
    expect(r.status).toBe(78);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toBe(`custos-${service}: invalid configuration: ${variable}: is required`);
    expect(r.stdout).toBe('');
  });

  it.each([
    ['gateway', 'PORT', 'eighty'],
    ['policy', 'GRPC_PORT', '70000'],
    ['identity', 'DATABASE_URL', 'mysql://x'],
    ['audit', 'LOG_LEVEL', 'loud'],
    ['billing', 'DATABASE_POOL_MAX', 'many'],
    ['gateway', 'TRUSTED_PROXIES', '10.0.0.0/33'],
    ['gateway', 'POLICY_ADDR', 'no-port'],
    ['vault-crypto', 'LOCAL_KMS_MASTER_KEY', Buffer.alloc(16, 1).toString('base64')],
    ['identity', 'TOKEN_SIGNING_KEK', Buffer.alloc(31, 1).toString('base64')],
    ['identity', 'SIGNUP_MODE', 'public'],
    // Below the 64 MiB floor of argon2id.
    ['identity', 'ARGON2_MEMORY_KIB', '19456'],
    ['identity', 'REFRESH_TOKEN_FAMILY_TTL_SECONDS', '60'],
  ])('%s with malformed %s', (service, variable, value) => {
    const r = start(service, { ...VALID, [variable]: value });
    expect(r.status).toBe(78);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^custos-${service}: invalid configuration: ${variable}: `));
    // The offending value is not echoed (it may be a secret).
    if (variable.includes('KEY') || variable.includes('KEK')) expect(r.stderr).not.toContain(value);
  });
});

describe('identity sends e-mail only over TLS unless SMTP_ALLOW_INSECURE', () => {
  // NATS unreachable on purpose: the refusal comes before anything is published, and no stream of
  // the machine's NATS is touched.
  const smtpEnv = (url: string, extra: Record<string, string> = {}) => {
    const env: Record<string, string> = { ...VALID, NATS_URL: 'nats://127.0.0.1:1', SMTP_URL: url, ...extra };
    delete env.MAIL_DIR;
    return env;
  };

  it.each([
    ['ignoreTLS=true', 'smtp://mailer:hunter2@127.0.0.1:2525?ignoreTLS=true'],
    ['requireTLS=false', 'smtp://mailer:hunter2@127.0.0.1:2525?requireTLS=false'],
    ['tls.rejectUnauthorized=false', 'smtps://mailer:hunter2@127.0.0.1:465?tls.rejectUnauthorized=false'],
  ])('refuses to start with %s, naming SMTP_URL and not echoing the password', (what, url) => {
    const r = start('identity', smtpEnv(url));
    expect(r.status).toBe(78);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toEqual([
      expect.stringMatching(
        new RegExp(
          `^custos-identity: invalid configuration: SMTP_URL: ${what.replace('.', '\\.')} .*SMTP_ALLOW_INSECURE=true`,
        ),
      ),
    ]);
    expect(r.stderr).not.toContain('hunter2');
  });
});

describe("mesh certificates are required and must be the service's own", () => {
  it('refuses to start without GRPC_TLS_CERT_FILE', () => {
    const r = start('policy', { ...VALID, GRPC_TLS_CERT_FILE: '' });
    expect(r.status).toBe(78);
    expect(r.stderr.trim()).toBe('custos-policy: invalid configuration: GRPC_TLS_CERT_FILE: is required');
  });

  it("refuses another service's certificate", () => {
    const r = start('policy', { ...VALID, ...tlsEnv('webhook-dispatcher') });
    expect(r.status).toBe(78);
    expect(r.stderr.trim()).toBe(
      "custos-policy: invalid configuration: GRPC_TLS_CERT_FILE is the certificate of 'webhook-dispatcher', not of 'policy'",
    );
  });

  it("refuses a key that is not the certificate's", () => {
    const r = start('billing', { ...VALID, GRPC_TLS_KEY_FILE: tlsEnv('audit')['GRPC_TLS_KEY_FILE']! });
    expect(r.status).toBe(78);
    expect(r.stderr.trim()).toMatch(
      /^custos-billing: invalid configuration: GRPC_TLS_KEY_FILE is not the key of/,
    );
  });
});
