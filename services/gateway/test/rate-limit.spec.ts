import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createLogger } from '@custos/service-kit';
import { exchangeKeyBucket, exchangeRateLimit, tokenBucket } from '../src/http/rate-limit';

// The token bucket against the real Redis: what a client may do, concurrently and over time.
describe('the Redis token bucket', () => {
  let redis: Redis;
  const key = () => `bucket-${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
      keyPrefix: `rl-test-${process.pid}:`,
      maxRetriesPerRequest: 0,
      lazyConnect: true,
    });
    await redis.connect();
  });
  afterAll(async () => {
    await redis.quit();
  });

  it('allows the burst, then refuses with the wait until the next token', async () => {
    const take = tokenBucket(redis, { ratePerSecond: 0.5, burst: 3 });
    const k = key();
    const verdicts = [];
    for (let i = 0; i < 5; i++) verdicts.push(await take(k));
    expect(verdicts.slice(0, 3)).toEqual([{ allowed: true }, { allowed: true }, { allowed: true }]);
    for (const v of verdicts.slice(3)) {
      expect(v.allowed).toBe(false);
      // One token every 2 s: never more than that to wait.
      expect(v.allowed === false && v.retryAfterMs).toBeGreaterThan(0);
      expect(v.allowed === false && v.retryAfterMs).toBeLessThanOrEqual(2000);
    }
    // Another client has its own bucket.
    expect(await take(key())).toEqual({ allowed: true });
  });

  it('refills at the rate', async () => {
    const take = tokenBucket(redis, { ratePerSecond: 20, burst: 1 });
    const k = key();
    expect((await take(k)).allowed).toBe(true);
    const refused = await take(k);
    expect(refused.allowed).toBe(false);
    await new Promise((r) => setTimeout(r, refused.allowed ? 0 : refused.retryAfterMs + 20));
    expect((await take(k)).allowed).toBe(true);
  });

  it('holds concurrent checks of one client to the burst', async () => {
    const take = tokenBucket(redis, { ratePerSecond: 0.01, burst: 10 });
    const k = key();
    const verdicts = await Promise.all(Array.from({ length: 60 }, () => take(k)));
    expect(verdicts.filter((v) => v.allowed)).toHaveLength(10);
  });

  it('rejects when Redis cannot answer, so the caller decides (the gateway lets the request through)', async () => {
    // Never connected and no offline queue: every command fails at once, as when Redis is down.
    const down = new Redis('redis://127.0.0.1:1', { enableOfflineQueue: false, lazyConnect: true });
    await expect(tokenBucket(down, { ratePerSecond: 1, burst: 1 })(key())).rejects.toThrow();
    down.disconnect();
  });
});

describe('the key-exchange limiter', () => {
  let redis: Redis;
  beforeAll(async () => {
    redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
      keyPrefix: `rl-exchange-test-${process.pid}-${randomBytes(3).toString('hex')}:`,
      maxRetriesPerRequest: 0,
      lazyConnect: true,
    });
    await redis.connect();
  });
  afterAll(async () => {
    await redis.quit();
  });

  const base62 = (n: number) =>
    Array.from(
      randomBytes(n),
      (b) => '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'[b % 62],
    ).join('');
  const agentKey = () => `ocv_${base62(16)}_${base62(43)}`;
  const ip = () => `10.${randomBytes(1)[0]}.${randomBytes(1)[0]}.${randomBytes(1)[0]}`;

  /** Runs the middleware once; resolves with the HTTP status it refused with, or 200 when it let through. */
  function run(mw: ReturnType<typeof exchangeRateLimit>, clientIp: string, body: unknown): Promise<number> {
    return new Promise((resolve) => {
      const req = { clientIp, body } as unknown as Parameters<typeof mw>[0];
      mw(req, {} as Parameters<typeof mw>[1], (err?: unknown) =>
        resolve(err ? (err as { httpStatus: number }).httpStatus : 200),
      );
    });
  }
  const limiter = (r: Redis) =>
    exchangeRateLimit({
      redis: r,
      logger: createLogger({ service: 'test', level: 'silent' }),
      perKey: { ratePerSecond: 0.01, burst: 3 },
      perIp: { ratePerSecond: 0.01, burst: 20 },
      malformed: { ratePerSecond: 0.01, burst: 2 },
    });

  it('names a bucket by the key’s prefix and lookup id only, never its secret', () => {
    const k = agentKey();
    expect(exchangeKeyBucket(k)).toBe(k.slice(0, 20));
    expect(exchangeKeyBucket(`csk_${k.slice(4)}`)).toBe(`csk_${k.slice(4, 20)}`);
    expect(exchangeKeyBucket(`${k}x`)).toBeUndefined();
    expect(exchangeKeyBucket('ocv_short_secret')).toBeUndefined();
    expect(exchangeKeyBucket(42)).toBeUndefined();
  });

  it('limits each key on its own, and many keys from one address up to the address bound', async () => {
    const mw = limiter(redis);
    const addr = ip();
    const one = agentKey();
    const same = [];
    for (let i = 0; i < 5; i++) same.push(await run(mw, addr, { api_key: one }));
    expect(same).toEqual([200, 200, 200, 429, 429]);
    // The same key from another address has a bucket of its own: someone who knows the key's id
    // (it is not secret) and spends its bucket from elsewhere does not lock the agent out here.
    expect(await run(mw, ip(), { api_key: one })).toBe(200);
    // Other keys from the same address are not held back by the first key's bucket...
    const others = await Promise.all(
      Array.from({ length: 15 }, () => run(mw, addr, { api_key: agentKey() })),
    );
    expect(others.every((s) => s === 200)).toBe(true);
    // ...until the address's bound (20, of which 5 were taken above) is spent.
    expect(await run(mw, addr, { api_key: agentKey() })).toBe(429);
    // Another address has its own bound.
    expect(await run(mw, ip(), { api_key: agentKey() })).toBe(200);
  });

  it('counts bodies without a well-formed key against the strict per-address bucket', async () => {
    const mw = limiter(redis);
    const addr = ip();
    const verdicts = [];
    for (const body of [{ api_key: 'guess' }, {}, 'x', { api_key: 'ocv_nope' }])
      verdicts.push(await run(mw, addr, body));
    expect(verdicts).toEqual([200, 200, 429, 429]);
    expect(await run(mw, addr, { api_key: agentKey() })).toBe(200);
  });

  it('refuses with 503 when Redis cannot answer', async () => {
    const down = new Redis('redis://127.0.0.1:1', { enableOfflineQueue: false, lazyConnect: true });
    expect(await run(limiter(down), ip(), { api_key: agentKey() })).toBe(503);
    down.disconnect();
  });
});
