import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConfigError } from '@custos/service-kit';
import { KeyUnwrapError } from './kms-errors.js';
import type { KmsProvider } from './kms-types.js';

const FORMAT_V1 = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Development-only provider: AES-256-GCM with a master key from configuration. The wrapped form is
 * `version(1) | iv(12) | tag(16) | ciphertext`, with the caller's context as associated data.
 */
export class LocalKms implements KmsProvider {
  readonly name = 'local';

  constructor(private readonly masterKey: Buffer) {
    if (masterKey.length !== 32) throw new Error('local KMS master key must be 32 bytes');
  }

  async wrapKey(dataKey: Buffer, context: string): Promise<Buffer> {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.masterKey, iv);
    cipher.setAAD(Buffer.from(context, 'utf8'));
    const ct = Buffer.concat([cipher.update(dataKey), cipher.final()]);
    return Buffer.concat([Buffer.from([FORMAT_V1]), iv, cipher.getAuthTag(), ct]);
  }

  async unwrapKey(wrapped: Buffer, context: string): Promise<Buffer> {
    if (wrapped.length < 1 + IV_BYTES + TAG_BYTES || wrapped[0] !== FORMAT_V1) throw new KeyUnwrapError();
    const iv = wrapped.subarray(1, 1 + IV_BYTES);
    const tag = wrapped.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
    const decipher = createDecipheriv('aes-256-gcm', this.masterKey, iv);
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(tag);
    try {
      return Buffer.concat([decipher.update(wrapped.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]);
    } catch {
      throw new KeyUnwrapError();
    }
  }
}

/** Reads the local master key from LOCAL_KMS_MASTER_KEY or LOCAL_KMS_MASTER_KEY_FILE. */
export function loadLocalMasterKey(config: {
  LOCAL_KMS_MASTER_KEY?: string | undefined;
  LOCAL_KMS_MASTER_KEY_FILE?: string | undefined;
}): Buffer {
  let encoded = config.LOCAL_KMS_MASTER_KEY;
  let variable = 'LOCAL_KMS_MASTER_KEY';
  if (!encoded && config.LOCAL_KMS_MASTER_KEY_FILE) {
    variable = 'LOCAL_KMS_MASTER_KEY_FILE';
    try {
      encoded = readFileSync(config.LOCAL_KMS_MASTER_KEY_FILE, 'utf8').trim();
    } catch {
      throw new ConfigError([{ variable, reason: 'file cannot be read' }]);
    }
  }
  if (!encoded) throw new ConfigError([{ variable, reason: 'is required when KMS_PROVIDER=local' }]);
  const key = Buffer.from(encoded, 'base64');
  if (key.length !== 32 || key.toString('base64') !== encoded.replace(/\s/g, '')) {
    throw new ConfigError([{ variable, reason: 'expected base64 of exactly 32 bytes' }]);
  }
  return key;
}
