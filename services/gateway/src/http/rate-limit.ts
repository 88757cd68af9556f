import type { RequestHandler } from 'express';
import type { Redis } from 'ioredis';
import { RateLimitedError, describeError, type Logger } from '@custos/service-kit';
import { rateLimitBucket } from './client-ip.js';

// Token bucket per key, atomic in Redis. KEYS[1] bucket; ARGV: rate/s, burst, now(ms), cost.
// Returns {allowed (0/1), milliseconds until one token is available}.
const TOKEN_BUCKET = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local b = redis.call('HMGET', KEYS[1], 't', 'ts')
local tokens = tonumber(b[1])
local ts = tonumber(b[2])
if tokens == nil then tokens = burst; ts = now end
if now > ts then tokens = math.min(burst, tokens + (now - ts) * rate / 1000); ts = now end
local allowed = 0
local wait = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
else
  wait = math.ceil((cost - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 't', tokens, 'ts', ts)
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return {allowed, wait}
`;

/** Options of the per-client-IP rate limiter. */
export interface RateLimitOptions {
  redis: Redis;
  ratePerSecond: number;
  burst: number;
  logger: Logger;
  /** Bucket name; different limits (e.g. per route) use different scopes. */
  scope?: string;
}

/**
 * Global per-client-IP rate limit (DECISIONS.md: 100/s, burst 200 by default), answered with 429 and
 * Retry-After. When Redis is unreachable the request is let through and the failure logged: the
 * limiter protects capacity, and taking the whole API down with Redis would defeat that purpose.
 */
export function rateLimit(opts: RateLimitOptions): RequestHandler {
  const scope = opts.scope ?? 'global';
  return (req, _res, next) => {
    const key = `custos:rl:${scope}:${rateLimitBucket(req.clientIp)}`;
    (
      opts.redis.eval(TOKEN_BUCKET, 1, key, opts.ratePerSecond, opts.burst, Date.now(), 1) as Promise<
        [number, number]
      >
    ).then(
      ([allowed, waitMs]) => {
        if (allowed === 1) return next();
        next(new RateLimitedError(Math.max(1, Math.ceil(waitMs / 1000))));
      },
      (err: unknown) => {
        opts.logger.warn({ err: describeError(err) }, 'rate limiter unavailable; request allowed');
        next();
      },
    );
  };
}
