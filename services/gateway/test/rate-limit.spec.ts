import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { tokenBucket } from '../src/http/rate-limit';

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
