import type { RedisOptions } from 'ioredis';
import { type RedisConnectionSettings, redisConnectionOptions } from '@custos/service-kit';

/**
 * Options of the gateway's Redis client (rate-limit buckets, revocation checks). Every request
 * sends two commands (the token-bucket EVALSHA and the revocation MGET); with auto-pipelining the
 * commands of all requests handled in one event-loop turn leave in one write and their replies come
 * back in one read, instead of a round trip each. Each command still gets its own reply (a refused
 * or failed one fails only its own request), and each is sent when its request asks, so a
 * revocation written before a request's check is seen by that check. No offline queue: when Redis
 * is down a command fails at once (the limiter lets the request through, the revocation check
 * answers 503) rather than waiting for a reconnect. `conn`: the CA and Redis Sentinel settings
 * (redisConnectionOptions).
 */
export function gatewayRedisOptions(url: string, conn: RedisConnectionSettings = {}): RedisOptions {
  return {
    maxRetriesPerRequest: 1,
    // A Redis that accepts connections but does not answer fails the command (and its request) in
    // 2 s instead of holding it until the client gives up.
    commandTimeout: 2000,
    enableOfflineQueue: false,
    enableAutoPipelining: true,
    lazyConnect: true,
    ...redisConnectionOptions({ ...conn, REDIS_URL: url }),
  };
}
