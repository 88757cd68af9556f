import fs from 'node:fs';
import { env } from './config.js';

/** The variable of a service whose Redis speaks TLS with a certificate from a private CA. */
export const redisTlsConfigShape = {
  REDIS_TLS_CA_FILE: env
    .string(
      'PEM file of the CA that signed the Redis server certificate, for a `rediss://` REDIS_URL whose server a public CA does not vouch for.',
    )
    .optional(),
};

/**
 * The TLS part of the ioredis options for `url`: a `rediss://` URL already means TLS (with the
 * system's CAs); `caFile` makes the client trust that CA instead. A CA file with a plain `redis://`
 * URL is a configuration mistake (the password would travel in the clear while the operator
 * thinks otherwise), so it throws.
 */
export function redisTlsOptions(url: string, caFile?: string): { tls?: { ca: Buffer } } {
  if (!caFile) return {};
  if (new URL(url).protocol !== 'rediss:')
    throw new Error('REDIS_TLS_CA_FILE is set but REDIS_URL is not a rediss:// URL');
  return { tls: { ca: fs.readFileSync(caFile) } };
}

/**
 * The variables of every service's Redis connection beside REDIS_URL: the CA of a private TLS
 * server, and Redis Sentinel (the sentinels find the current master; REDIS_URL still gives the
 * data user, password, database and whether TLS is spoken).
 */
export const redisConnectionConfigShape = {
  ...redisTlsConfigShape,
  REDIS_SENTINELS: env.list(
    'Comma-separated `host:port` of the Redis Sentinels to ask for the current master (empty: connect to the host of REDIS_URL). With sentinels, REDIS_URL still gives the data user, password, database and `rediss://` for TLS (to the master and to the sentinels, with REDIS_TLS_CA_FILE); its host and port are ignored.',
  ),
  REDIS_SENTINEL_MASTER: env
    .string(
      'Name of the master the sentinels monitor (their `sentinel monitor <name>`); required with REDIS_SENTINELS.',
    )
    .optional(),
  REDIS_SENTINEL_USERNAME: env
    .string(
      "ACL user to authenticate to the sentinels with (the sentinels' own user, not REDIS_URL's data user).",
    )
    .optional(),
  REDIS_SENTINEL_PASSWORD: env
    .string(
      'Password to authenticate to the sentinels with (`requirepass` of the sentinels, or of REDIS_SENTINEL_USERNAME); never logged.',
    )
    .optional(),
};

/** A service's Redis connection settings (its config has these variables). */
export interface RedisConnectionConfig {
  REDIS_URL: string;
  REDIS_TLS_CA_FILE?: string | undefined;
  REDIS_SENTINELS?: readonly string[] | undefined;
  REDIS_SENTINEL_MASTER?: string | undefined;
  REDIS_SENTINEL_USERNAME?: string | undefined;
  REDIS_SENTINEL_PASSWORD?: string | undefined;
}

/** RedisConnectionConfig without REDIS_URL (given beside it). */
export type RedisConnectionSettings = Omit<RedisConnectionConfig, 'REDIS_URL'>;

/** The connection part of ioredis options (structurally an ioredis `RedisOptions`). */
export interface RedisConnectionOptions {
  tls?: { ca: Buffer };
  sentinels?: Array<{ host: string; port: number }>;
  /** The master's name, in sentinel mode. */
  name?: string;
  sentinelUsername?: string;
  sentinelPassword?: string;
  sentinelTLS?: { ca?: Buffer };
  enableTLSForSentinelMode?: boolean;
  /** In sentinel mode: reconnect (to the master the sentinels now name) on a READONLY reply. */
  reconnectOnError?: (err: Error) => boolean;
}

/** Thrown for a Redis connection setting that cannot work; names the variable, never a secret. */
export class RedisConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RedisConfigError';
  }
}

/**
 * The connection part of a service's ioredis options, passed with REDIS_URL to `new Redis(url,
 * options)`: TLS trust (redisTlsOptions) and, with REDIS_SENTINELS, sentinel mode. In sentinel
 * mode ioredis asks the sentinels for the master of REDIS_SENTINEL_MASTER and follows failovers;
 * the user, password and database still come from REDIS_URL, and a `rediss://` URL makes both
 * the master connection and the sentinel connections TLS (with the same CA).
 */
export function redisConnectionOptions(c: RedisConnectionConfig): RedisConnectionOptions {
  const tls = redisTlsOptions(c.REDIS_URL, c.REDIS_TLS_CA_FILE);
  const sentinels = c.REDIS_SENTINELS ?? [];
  if (sentinels.length === 0) {
    if (c.REDIS_SENTINEL_MASTER)
      throw new RedisConfigError('REDIS_SENTINEL_MASTER is set but REDIS_SENTINELS is empty');
    return tls;
  }
  if (!c.REDIS_SENTINEL_MASTER)
    throw new RedisConfigError('REDIS_SENTINELS is set but REDIS_SENTINEL_MASTER (the master name) is not');
  const overTls = new URL(c.REDIS_URL).protocol === 'rediss:';
  return {
    ...tls,
    sentinels: sentinels.map(sentinelAddress),
    name: c.REDIS_SENTINEL_MASTER,
    ...(c.REDIS_SENTINEL_USERNAME ? { sentinelUsername: c.REDIS_SENTINEL_USERNAME } : {}),
    ...(c.REDIS_SENTINEL_PASSWORD ? { sentinelPassword: c.REDIS_SENTINEL_PASSWORD } : {}),
    // A connection still on a demoted master gets READONLY for writes: the command fails (an outage,
    // 503) and the client reconnects, asking the sentinels for the new master.
    reconnectOnError: (err) => err.message.startsWith('READONLY '),
    // Without enableTLSForSentinelMode ioredis would reach the master it was told of in the clear.
    ...(overTls ? { enableTLSForSentinelMode: true, sentinelTLS: tls.tls ? { ca: tls.tls.ca } : {} } : {}),
  };
}

/** `host:port` (IPv6 in brackets) of one sentinel. */
function sentinelAddress(entry: string): { host: string; port: number } {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(entry);
  const port = m ? Number(m[2]) : 0;
  if (!m || port < 1 || port > 65535)
    throw new RedisConfigError(`REDIS_SENTINELS: expected host:port, got "${entry}"`);
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port };
}
