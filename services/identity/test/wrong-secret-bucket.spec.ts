import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { WrongSecretBucket, wrongSecretKey } from '../src/credentials/wrong-secret-bucket';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

// The per-key count of wrong secrets against a real Redis: counted atomically across concurrent
// refusals (as from many client addresses and replicas), per key, in a one-minute window.
describe('WrongSecretBucket against Redis', () => {
  let redis: Redis;
  const warnings: unknown[] = [];
  const logger = { warn: (o: unknown) => void warnings.push(o) };

  beforeAll(() => {
    redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  });
  afterAll(() => redis.disconnect());

  it('audits the first perMinute wrong secrets of a key, limits once with a record, then silently', async () => {
    const bucket = new WrongSecretBucket(redis, 5, logger);
    const key = randomUUID();
    const verdicts = [];
    for (let i = 0; i < 8; i++) verdicts.push((await bucket.count('agent_key', key)).verdict);
    expect(verdicts).toEqual(['audit', 'audit', 'audit', 'audit', 'audit', 'limit', 'limited', 'limited']);
    const last = await bucket.count('agent_key', key);
    expect(last).toMatchObject({ verdict: 'limited', perMinute: 5 });
    expect(last.retryAfter).toBeGreaterThanOrEqual(1);
    expect(last.retryAfter).toBeLessThanOrEqual(60);
    // The counter lives one minute from the first wrong secret.
    const ttl = await redis.pttl(wrongSecretKey('agent_key', key));
    expect(ttl).toBeGreaterThan(50_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });

  it('holds 200 concurrent wrong secrets of one key to exactly perMinute records and one limit', async () => {
    const bucket = new WrongSecretBucket(redis, 20, logger);
    const key = randomUUID();
    const verdicts = await Promise.all(
      Array.from({ length: 200 }, () => bucket.count('personal_key', key).then((c) => c.verdict)),
    );
    expect(verdicts.filter((v) => v === 'audit')).toHaveLength(20);
    expect(verdicts.filter((v) => v === 'limit')).toHaveLength(1);
    expect(verdicts.filter((v) => v === 'limited')).toHaveLength(179);
  });

  it('counts each key and each kind of key apart', async () => {
    const bucket = new WrongSecretBucket(redis, 1, logger);
    const a = randomUUID();
    const b = randomUUID();
    expect((await bucket.count('router_key', a)).verdict).toBe('audit');
    expect((await bucket.count('router_key', a)).verdict).toBe('limit');
    expect((await bucket.count('router_key', b)).verdict).toBe('audit');
    expect((await bucket.count('agent_key', a)).verdict).toBe('audit');
  });

  it('audits every refusal when Redis does not answer (and says so in the log)', async () => {
    const down = new Redis('redis://127.0.0.1:1', {
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      lazyConnect: true,
    });
    down.on('error', () => undefined);
    const bucket = new WrongSecretBucket(down, 1, logger);
    const before = warnings.length;
    for (let i = 0; i < 3; i++) expect((await bucket.count('agent_key', randomUUID())).verdict).toBe('audit');
    expect(warnings.length).toBe(before + 3);
    down.disconnect();
  });
});
