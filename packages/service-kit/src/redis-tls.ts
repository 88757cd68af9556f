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
