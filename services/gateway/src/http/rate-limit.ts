import type { RequestHandler } from 'express';
import type { Redis } from 'ioredis';
import { RateLimitedError, UnavailableError, describeError, type Logger } from '@custos/service-kit';
import { rateLimitBucket } from './client-ip.js';

// Token bucket per key, atomic in Redis. KEYS[1] bucket; ARGV: rate/s, burst, now(ms), cost.
// Returns {allowed (0/1), milliseconds until one token is available}.
//
// Kept rather than rate-limiter-flexible (services/gateway/bench/rate-limit.bench.mjs): the
// library's Redis limiters are fixed windows; its "rate with a burst" (BurstyRateLimiter) makes a
// second round trip for every refused check and measured half this script's rate on a hot client,
// the case a limiter exists for. A single fixed window measured the same as this script but lets
// twice the burst through across a window edge.
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

const COMMAND = 'custosTokenBucket';

type WithTokenBucket = Redis & {
  [COMMAND]: (
    key: string,
    rate: number,
    burst: number,
    now: number,
    cost: number,
  ) => Promise<[number, number]>;
};

/** The answer for one request: allowed, or refused with the wait until a token is there. */
export type Verdict = { allowed: true } | { allowed: false; retryAfterMs: number };

/**
 * A token bucket per key in Redis: `burst` tokens, refilled at `ratePerSecond`. The script is sent
 * once and then run by its hash (EVALSHA; ioredis reloads it after a Redis restart). Rejects when
 * Redis cannot answer.
 */
export function tokenBucket(
  redis: Redis,
  opts: { ratePerSecond: number; burst: number },
): (key: string) => Promise<Verdict> {
  if (!(COMMAND in redis)) redis.defineCommand(COMMAND, { numberOfKeys: 1, lua: TOKEN_BUCKET });
  const r = redis as WithTokenBucket;
  return async (key) => {
    const [allowed, waitMs] = await r[COMMAND](key, opts.ratePerSecond, opts.burst, Date.now(), 1);
    return allowed === 1 ? { allowed: true } : { allowed: false, retryAfterMs: waitMs };
  };
}

/** Options of the per-client-IP rate limiter. */
export interface RateLimitOptions {
  redis: Redis;
  ratePerSecond: number;
  burst: number;
  logger: Logger;
  /** Bucket name; different limits (e.g. per route) use different scopes. */
  scope?: string;
  /**
   * Refuse (503 + Retry-After) instead of letting the request through when Redis cannot be asked:
   * the credential routes, where the limit is what stands between a password and a guessing script.
   */
  failClosed?: boolean;
}

/**
 * Global per-client-IP rate limit (DECISIONS.md: 100/s, burst 200 by default), answered with 429 and
 * Retry-After. When Redis is unreachable the request is let through and the failure logged: the
 * limiter protects capacity, and taking the whole API down with Redis would defeat that purpose.
 */
export function rateLimit(opts: RateLimitOptions): RequestHandler {
  const scope = opts.scope ?? 'global';
  const take = tokenBucket(opts.redis, opts);
  return (req, _res, next) => {
    take(`custos:rl:${scope}:${rateLimitBucket(req.clientIp)}`).then(
      (v) => {
        if (v.allowed) return next();
        next(new RateLimitedError(Math.max(1, Math.ceil(v.retryAfterMs / 1000))));
      },
      (err: unknown) => {
        if (opts.failClosed) {
          opts.logger.warn({ err: describeError(err), scope }, 'rate limiter unavailable; request refused');
          next(
            new UnavailableError(
              'this route is unavailable while its attempt limit cannot be checked; retry shortly',
            ),
          );
          return;
        }
        opts.logger.warn({ err: describeError(err) }, 'rate limiter unavailable; request allowed');
        next();
      },
    );
  };
}

/** A token bucket's settings. */
export interface BucketLimit {
  ratePerSecond: number;
  burst: number;
}

/** Options of the limiter of the key exchanges (`/v1/auth/agent-token`, `/v1/auth/api-key-token`). */
export interface ExchangeRateLimitOptions {
  redis: Redis;
  logger: Logger;
  /** Exchanges of one key from one client IP (so of one agent, or one user's personal key, there). */
  perKey: BucketLimit;
  /** All exchanges from one client IP: well above a fleet of agents behind one NAT. */
  perIp: BucketLimit;
  /** Exchanges whose body holds no well-formed key share the strict credential limit per IP. */
  malformed: BucketLimit;
}

// `<prefix><16 base62 id>_<43 base62 secret>` (identity's secret-token-fns); only the id, the
// lookup key of the stored hash and not secret, names the bucket.
const EXCHANGE_KEY = /^(ocv_|csk_|sk-proxy-v1-)([0-9A-Za-z]{16})_[0-9A-Za-z]{43}$/;

/** The bucket name of a presented key (prefix and lookup id), or undefined when it is no key. */
export function exchangeKeyBucket(apiKey: unknown): string | undefined {
  if (typeof apiKey !== 'string') return undefined;
  const m = EXCHANGE_KEY.exec(apiKey);
  return m ? `${m[1]}${m[2]}` : undefined;
}

/**
 * The limit of the key exchanges, after the body is parsed: each key (one agent's, or one user's)
 * has its own bucket per client IP, and the client IP a large one, so that a fleet of agents behind one address
 * all get their tokens while one key cannot be exchanged in a loop. A body without a well-formed
 * key is counted in the strict per-IP credential bucket (the one of sign-in). Refuses (503) when
 * Redis cannot be asked, like every credential route.
 */
export function exchangeRateLimit(opts: ExchangeRateLimitOptions): RequestHandler {
  const perKey = tokenBucket(opts.redis, opts.perKey);
  const perIp = tokenBucket(opts.redis, opts.perIp);
  const malformed = tokenBucket(opts.redis, opts.malformed);
  const refuse = (v: Verdict) =>
    v.allowed ? undefined : new RateLimitedError(Math.max(1, Math.ceil(v.retryAfterMs / 1000)));
  return (req, _res, next) => {
    const ip = rateLimitBucket(req.clientIp);
    const body: unknown = req.body;
    const key = exchangeKeyBucket(
      body && typeof body === 'object' ? (body as Record<string, unknown>)['api_key'] : undefined,
    );
    const check = async () => {
      if (!key) return refuse(await malformed(`custos:rl:auth:${ip}`));
      return (
        refuse(await perIp(`custos:rl:exchange-ip:${ip}`)) ??
        // Per key *from this address*: the key's id is not secret (a router key shows it as its
        // prefix), so a bucket of the key alone could be emptied by anyone who knows it, locking the
        // agent out from elsewhere.
        refuse(await perKey(`custos:rl:exchange-key:${ip}:${key}`))
      );
    };
    check().then(
      (err) => next(err),
      (err: unknown) => {
        opts.logger.warn(
          { err: describeError(err), scope: 'exchange' },
          'rate limiter unavailable; request refused',
        );
        next(
          new UnavailableError(
            'this route is unavailable while its attempt limit cannot be checked; retry shortly',
          ),
        );
      },
    );
  };
}
