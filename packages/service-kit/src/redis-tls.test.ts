import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from './config';
import {
  redisConnectionConfigShape,
  redisConnectionOptions,
  redisTlsConfigShape,
  redisTlsOptions,
} from './redis-tls';

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

describe('redisConnectionOptions (REDIS_SENTINELS)', () => {
  const ca = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'custos-redis-ca-')), 'ca.pem');
  fs.writeFileSync(ca, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
  const sentinelEnv = {
    REDIS_URL: 'redis://gateway:data-pw@ignored.example:6379/2',
    REDIS_SENTINELS: 's1.example:26379, [fd00::1]:26380',
    REDIS_SENTINEL_MASTER: 'custos',
    REDIS_SENTINEL_USERNAME: 'sentinel-user',
    REDIS_SENTINEL_PASSWORD: 'sentinel-pw',
  };

  it('without sentinels is the TLS part alone', () => {
    const c = loadConfig(redisConnectionConfigShape, {});
    expect(c.REDIS_SENTINELS).toEqual([]);
    expect(redisConnectionOptions({ REDIS_URL: 'redis://127.0.0.1:6379', ...c })).toEqual({});
  });

  it('names the sentinels, the master and the sentinels own credentials', () => {
    const c = { ...loadConfig(redisConnectionConfigShape, sentinelEnv), REDIS_URL: sentinelEnv.REDIS_URL };
    const o = redisConnectionOptions(c);
    expect(o.sentinels).toEqual([
      { host: 's1.example', port: 26379 },
      { host: 'fd00::1', port: 26380 },
    ]);
    expect(o.name).toBe('custos');
    expect(o.sentinelUsername).toBe('sentinel-user');
    expect(o.sentinelPassword).toBe('sentinel-pw');
    expect(o.enableTLSForSentinelMode).toBeUndefined();
    expect(o.tls).toBeUndefined();
    expect(o.reconnectOnError?.(new Error("READONLY You can't write against a read only replica."))).toBe(
      true,
    );
    expect(o.reconnectOnError?.(new Error('WRONGTYPE Operation against a key'))).toBe(false);
  });

  it('with rediss:// speaks TLS to the master and to the sentinels, trusting the same CA', () => {
    const o = redisConnectionOptions({
      REDIS_URL: 'rediss://gateway:pw@ignored.example:6380',
      REDIS_TLS_CA_FILE: ca,
      REDIS_SENTINELS: ['s1.example:26379'],
      REDIS_SENTINEL_MASTER: 'custos',
    });
    expect(o.enableTLSForSentinelMode).toBe(true);
    expect(o.tls?.ca.toString()).toContain('BEGIN CERTIFICATE');
    expect(o.sentinelTLS?.ca?.toString()).toContain('BEGIN CERTIFICATE');
    // rediss:// without a CA file: TLS with the system CAs, to both.
    const sys = redisConnectionOptions({
      REDIS_URL: 'rediss://gateway:pw@ignored.example:6380',
      REDIS_SENTINELS: ['s1.example:26379'],
      REDIS_SENTINEL_MASTER: 'custos',
    });
    expect(sys.enableTLSForSentinelMode).toBe(true);
    expect(sys.sentinelTLS).toEqual({});
  });

  it('refuses half a sentinel setting and a malformed address, naming the variable and no secret', () => {
    const url = 'redis://u:s3cret@h:6379';
    expect(() => redisConnectionOptions({ REDIS_URL: url, REDIS_SENTINELS: ['s1:26379'] })).toThrow(
      /REDIS_SENTINELS is set but REDIS_SENTINEL_MASTER/,
    );
    expect(() => redisConnectionOptions({ REDIS_URL: url, REDIS_SENTINEL_MASTER: 'm' })).toThrow(
      /REDIS_SENTINEL_MASTER is set but REDIS_SENTINELS is empty/,
    );
    for (const bad of ['s1', 's1:0', 's1:99999', 'u:p@s1:26379']) {
      let message = '';
      try {
        redisConnectionOptions({ REDIS_URL: url, REDIS_SENTINELS: [bad], REDIS_SENTINEL_MASTER: 'm' });
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toMatch(/^REDIS_SENTINELS: expected host:port/);
      expect(message).not.toContain('s3cret');
    }
  });
});
