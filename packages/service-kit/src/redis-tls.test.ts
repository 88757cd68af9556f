import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from './config';
import { redisTlsConfigShape, redisTlsOptions } from './redis-tls';

describe('redisTlsOptions', () => {
  const ca = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'custos-redis-ca-')), 'ca.pem');
  fs.writeFileSync(ca, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');

  it('adds nothing without a CA file (rediss:// alone means TLS with the system CAs)', () => {
    expect(redisTlsOptions('rediss://:pw@redis.example:6380')).toEqual({});
    expect(redisTlsOptions('redis://127.0.0.1:6379')).toEqual({});
  });

  it('trusts the given CA for a rediss:// URL', () => {
    expect(redisTlsOptions('rediss://:pw@redis.example:6380', ca).tls?.ca.toString()).toContain(
      'BEGIN CERTIFICATE',
    );
  });

  it('refuses a CA file with a plain redis:// URL, naming no password', () => {
    expect(() => redisTlsOptions('redis://:s3cret@redis.example:6379', ca)).toThrow(/not a rediss:\/\/ URL/);
    try {
      redisTlsOptions('redis://:s3cret@redis.example:6379', ca);
    } catch (err) {
      expect((err as Error).message).not.toContain('s3cret');
    }
  });

  it('is optional in the configuration', () => {
    expect(loadConfig(redisTlsConfigShape, {})).toEqual({ REDIS_TLS_CA_FILE: undefined });
    expect(loadConfig(redisTlsConfigShape, { REDIS_TLS_CA_FILE: ca })).toEqual({ REDIS_TLS_CA_FILE: ca });
  });
});
