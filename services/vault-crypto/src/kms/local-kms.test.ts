import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigError } from '@custos/service-kit';
import { checkKmsHealth } from './kms-fns';
import type { KmsProvider } from './kms-types';
import { KeyUnwrapError } from './kms-errors';
import { LocalKms, loadLocalMasterKey } from './local-kms';

describe('LocalKms', () => {
  const kms = new LocalKms(randomBytes(32));

  it('wraps and unwraps a data key, never storing it in the clear', async () => {
    const dataKey = randomBytes(32);
    const wrapped = await kms.wrapKey(dataKey, 'org:1');
    expect(wrapped.includes(dataKey)).toBe(false);
    expect(await kms.unwrapKey(wrapped, 'org:1')).toEqual(dataKey);
  });

  it('refuses another context, another master key, and tampered bytes', async () => {
    const wrapped = await kms.wrapKey(randomBytes(32), 'org:1');
    await expect(kms.unwrapKey(wrapped, 'org:2')).rejects.toBeInstanceOf(KeyUnwrapError);
    await expect(new LocalKms(randomBytes(32)).unwrapKey(wrapped, 'org:1')).rejects.toBeInstanceOf(
      KeyUnwrapError,
    );
    const tampered = Buffer.from(wrapped);
    tampered[tampered.length - 1]! ^= 1;
    await expect(kms.unwrapKey(tampered, 'org:1')).rejects.toBeInstanceOf(KeyUnwrapError);
    await expect(kms.unwrapKey(Buffer.alloc(5), 'org:1')).rejects.toBeInstanceOf(KeyUnwrapError);
  });
});

describe('loadLocalMasterKey', () => {
  const key = randomBytes(32).toString('base64');

  it('reads the key from the variable or from a file', () => {
    expect(loadLocalMasterKey({ LOCAL_KMS_MASTER_KEY: key }).toString('base64')).toBe(key);
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'kms-')), 'master.key');
    writeFileSync(file, `${key}\n`);
    expect(loadLocalMasterKey({ LOCAL_KMS_MASTER_KEY_FILE: file }).toString('base64')).toBe(key);
  });

  it('names the variable when the key is missing, unreadable or not 32 bytes', () => {
    expect(() => loadLocalMasterKey({})).toThrow(/LOCAL_KMS_MASTER_KEY: is required/);
    expect(() => loadLocalMasterKey({ LOCAL_KMS_MASTER_KEY_FILE: '/nonexistent/key' })).toThrow(
      /LOCAL_KMS_MASTER_KEY_FILE: file cannot be read/,
    );
    expect(() => loadLocalMasterKey({ LOCAL_KMS_MASTER_KEY: randomBytes(16).toString('base64') })).toThrow(
      ConfigError,
    );
    expect(() => loadLocalMasterKey({ LOCAL_KMS_MASTER_KEY: 'not base64 at all!' })).toThrow(ConfigError);
  });
});

describe('checkKmsHealth', () => {
  it('is healthy when the round trip returns the key', async () => {
    expect(await checkKmsHealth(new LocalKms(randomBytes(32)))).toMatchObject({ healthy: true, detail: '' });
  });

  it('reports a provider that fails, corrupts, or hangs', async () => {
    const failing: KmsProvider = {
      name: 'x',
      wrapKey: async () => {
        throw new Error('HSM session closed');
      },
      unwrapKey: async (b) => b,
    };
    expect(await checkKmsHealth(failing)).toMatchObject({ healthy: false, detail: 'HSM session closed' });
    const corrupting: KmsProvider = {
      name: 'x',
      wrapKey: async (k) => k,
      unwrapKey: async () => randomBytes(32),
    };
    expect(await checkKmsHealth(corrupting)).toMatchObject({ healthy: false });
    const hanging: KmsProvider = {
      name: 'x',
      wrapKey: () => new Promise(() => undefined),
      unwrapKey: async (b) => b,
    };
    expect(await checkKmsHealth(hanging, 50)).toMatchObject({
      healthy: false,
      detail: 'no answer within 50 ms',
    });
  });
});
