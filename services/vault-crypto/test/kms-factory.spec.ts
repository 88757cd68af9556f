import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigError, createLogger, describeConfig, loadConfig } from '@custos/service-kit';
import { kmsConfigShape } from '../src/kms/kms-config';
import { awsKmsOptions, createKmsProvider, type KmsSettings, pkcs11Options } from '../src/kms/kms-factory';

const logger = createLogger({ service: 'vault-crypto-test', level: 'silent' });

/** The problems of the ConfigError that `fn` throws (or resolves to a rejection with). */
async function problemsOf(fn: () => unknown): Promise<ReadonlyArray<{ variable: string; reason: string }>> {
  try {
    await fn();
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error('no ConfigError was thrown');
}

describe('KMS configuration', () => {
  it('describes every variable and says which provider it applies to', () => {
    const docs = describeConfig(kmsConfigShape);
    expect(docs.map((d) => d.variable)).toEqual([
      'KMS_PROVIDER',
      'KMS_ALLOW_LOCAL',
      'LOCAL_KMS_MASTER_KEY',
      'LOCAL_KMS_MASTER_KEY_FILE',
      'AWS_KMS_KEY_ID',
      'AWS_REGION',
      'AWS_KMS_ENDPOINT',
      'AWS_KMS_TIMEOUT_MS',
      'PKCS11_LIBRARY',
      'PKCS11_SLOT',
      'PKCS11_TOKEN_LABEL',
      'PKCS11_PIN',
      'PKCS11_PIN_FILE',
      'PKCS11_KEY_LABEL',
      'PKCS11_GENERATE_KEY',
    ]);
    for (const d of docs.slice(1)) expect(d.description).toMatch(/^With KMS_PROVIDER=(local|aws-kms|pkcs11)/);
    expect(docs.find((d) => d.variable === 'AWS_KMS_TIMEOUT_MS')?.default).toBe('5000');
    expect(docs.find((d) => d.variable === 'PKCS11_GENERATE_KEY')?.default).toBe('false');
  });

  it('parses the variables and names a malformed one', async () => {
    const parsed = loadConfig(kmsConfigShape, {
      KMS_PROVIDER: 'pkcs11',
      PKCS11_SLOT: '7',
      PKCS11_GENERATE_KEY: 'true',
    });
    expect(parsed).toMatchObject({ PKCS11_SLOT: 7, PKCS11_GENERATE_KEY: true, AWS_KMS_TIMEOUT_MS: 5000 });
    expect(await problemsOf(() => loadConfig(kmsConfigShape, { KMS_PROVIDER: 'vault' }))).toEqual([
      { variable: 'KMS_PROVIDER', reason: expect.stringContaining("'aws-kms'") },
    ]);
    expect(await problemsOf(() => loadConfig(kmsConfigShape, {}))).toEqual([
      { variable: 'KMS_PROVIDER', reason: 'is required' },
    ]);
    const bad = { KMS_PROVIDER: 'aws-kms', AWS_KMS_ENDPOINT: 'kms.local', PKCS11_SLOT: 'first' };
    expect((await problemsOf(() => loadConfig(kmsConfigShape, bad))).map((p) => p.variable)).toEqual([
      'AWS_KMS_ENDPOINT',
      'PKCS11_SLOT',
    ]);
  });
});

describe('createKmsProvider', () => {
  it('names an unknown provider', async () => {
    expect(await problemsOf(() => createKmsProvider({ KMS_PROVIDER: 'vault' }, logger))).toEqual([
      { variable: 'KMS_PROVIDER', reason: 'unknown provider "vault"' },
    ]);
  });

  it('builds the local provider only when explicitly allowed, and names its missing key', async () => {
    const key = randomBytes(32).toString('base64');
    expect(
      await problemsOf(() => createKmsProvider({ KMS_PROVIDER: 'local', LOCAL_KMS_MASTER_KEY: key }, logger)),
    ).toEqual([{ variable: 'KMS_PROVIDER', reason: expect.stringContaining('KMS_ALLOW_LOCAL=true') }]);
    expect(
      await problemsOf(() =>
        createKmsProvider(
          { KMS_PROVIDER: 'local', KMS_ALLOW_LOCAL: false, LOCAL_KMS_MASTER_KEY: key },
          logger,
        ),
      ),
    ).toEqual([{ variable: 'KMS_PROVIDER', reason: expect.stringContaining('development only') }]);
    const kms = await createKmsProvider(
      { KMS_PROVIDER: 'local', KMS_ALLOW_LOCAL: true, LOCAL_KMS_MASTER_KEY: key },
      logger,
    );
    expect(kms.name).toBe('local');
    expect(
      await problemsOf(() => createKmsProvider({ KMS_PROVIDER: 'local', KMS_ALLOW_LOCAL: true }, logger)),
    ).toEqual([{ variable: 'LOCAL_KMS_MASTER_KEY', reason: 'is required when KMS_PROVIDER=local' }]);
  });

  it('names every missing aws-kms variable, and takes the region from a key ARN', async () => {
    expect(await problemsOf(() => createKmsProvider({ KMS_PROVIDER: 'aws-kms' }, logger))).toEqual([
      { variable: 'AWS_KMS_KEY_ID', reason: 'is required when KMS_PROVIDER=aws-kms' },
      { variable: 'AWS_REGION', reason: expect.stringContaining('is required when KMS_PROVIDER=aws-kms') },
    ]);
    expect(
      await problemsOf(() =>
        createKmsProvider({ KMS_PROVIDER: 'aws-kms', AWS_KMS_KEY_ID: 'alias/custos' }, logger),
      ),
    ).toEqual([{ variable: 'AWS_REGION', reason: expect.stringContaining('not an ARN') }]);
    const arn = 'arn:aws:kms:eu-central-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';
    expect(awsKmsOptions({ KMS_PROVIDER: 'aws-kms', AWS_KMS_KEY_ID: arn })).toEqual({
      keyId: arn,
      region: 'eu-central-1',
      endpoint: undefined,
      timeoutMs: 5000,
    });
    expect(
      awsKmsOptions({
        KMS_PROVIDER: 'aws-kms',
        AWS_KMS_KEY_ID: arn,
        AWS_REGION: 'us-east-1',
        AWS_KMS_TIMEOUT_MS: 900,
      }),
    ).toMatchObject({ region: 'us-east-1', timeoutMs: 900 });
    // Built without calling KMS: an outage at start does not stop the service.
    const kms = await createKmsProvider(
      {
        KMS_PROVIDER: 'aws-kms',
        AWS_KMS_KEY_ID: 'alias/custos',
        AWS_REGION: 'eu-west-1',
        AWS_KMS_ENDPOINT: 'http://127.0.0.1:9',
      },
      logger,
    );
    expect(kms.name).toBe('aws-kms');
    await kms.close?.();
  });

  it('names every missing pkcs11 variable before touching a module', async () => {
    expect(await problemsOf(() => createKmsProvider({ KMS_PROVIDER: 'pkcs11' }, logger))).toEqual([
      { variable: 'PKCS11_LIBRARY', reason: 'is required when KMS_PROVIDER=pkcs11' },
      {
        variable: 'PKCS11_TOKEN_LABEL',
        reason: 'PKCS11_TOKEN_LABEL or PKCS11_SLOT is required when KMS_PROVIDER=pkcs11',
      },
      { variable: 'PKCS11_KEY_LABEL', reason: 'is required when KMS_PROVIDER=pkcs11' },
      {
        variable: 'PKCS11_PIN',
        reason: 'PKCS11_PIN or PKCS11_PIN_FILE is required when KMS_PROVIDER=pkcs11',
      },
    ]);
    const base: KmsSettings = {
      KMS_PROVIDER: 'pkcs11',
      PKCS11_LIBRARY: '/usr/lib/softhsm/libsofthsm2.so',
      PKCS11_SLOT: 0,
      PKCS11_KEY_LABEL: 'custos-kek',
    };
    expect(await problemsOf(() => pkcs11Options({ ...base, PKCS11_PIN_FILE: '/nonexistent/pin' }))).toEqual([
      { variable: 'PKCS11_PIN_FILE', reason: 'file cannot be read' },
    ]);
    const dir = mkdtempSync(path.join(tmpdir(), 'custos-pin-'));
    writeFileSync(path.join(dir, 'empty'), '\n');
    expect(
      await problemsOf(() => pkcs11Options({ ...base, PKCS11_PIN_FILE: path.join(dir, 'empty') })),
    ).toEqual([{ variable: 'PKCS11_PIN_FILE', reason: 'file is empty' }]);
    writeFileSync(path.join(dir, 'pin'), '12 34\n');
    expect(pkcs11Options({ ...base, PKCS11_PIN_FILE: path.join(dir, 'pin') })).toMatchObject({
      pin: '12 34',
      pinVariable: 'PKCS11_PIN_FILE',
      slot: 0,
      generateKey: false,
    });
  });
});
