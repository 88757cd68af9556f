import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { freePort } from '@custos/service-kit/testing';
import { UnavailableError, createMetrics } from '@custos/service-kit';
import type { Principal } from '../src';
import {
  REVOCATIONS_PUBLISHED_KEY,
  redisAnswers,
  redisRevocationCheck,
  revocationKey,
  subjectOf,
  verifierRedisOptions,
} from '../src';

function user(overrides: Partial<{ tokenId: string; sessionId: string; issuedAt: number }> = {}): Principal {
  return {
    kind: 'user',
    userId: randomUUID(),
    orgId: randomUUID(),
    role: 'owner',
    platformAdmin: false,
    amr: ['pwd'],
    sessionId: overrides.sessionId ?? randomUUID(),
    tokenId: overrides.tokenId ?? randomUUID(),
    issuedAt: overrides.issuedAt ?? 1_000,
    expiresAt: 2_000,
    issuer: 'http://x',
  };
}

const KID = `kid-${randomUUID()}`;

describe('redisRevocationCheck (against Redis)', () => {
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: true });
  const isRevoked = redisRevocationCheck(redis);
  beforeAll(() => redis.connect());
  afterAll(() => redis.quit());

  it('is false for a token nothing names', async () => {
    expect(await isRevoked(user(), KID)).toBe(false);
  });

  it('is true for a revoked token id and for a revoked session', async () => {
    const a = user();
    await redis.set(revocationKey('jti', a.tokenId), '1', 'EX', 60);
    expect(await isRevoked(a, KID)).toBe(true);
    const b = user();
    await redis.set(revocationKey('sid', (b as { sessionId: string }).sessionId), '1', 'EX', 60);
    expect(await isRevoked(b, KID)).toBe(true);
  });

  it('is true for every token signed by a retired kid, and only for that kid', async () => {
    const kid = `kid-${randomUUID()}`;
    await redis.set(revocationKey('kid', kid), '1', 'EX', 60);
    expect(await isRevoked(user(), kid)).toBe(true);
    expect(await isRevoked(user(), KID)).toBe(false);
  });

  it('revokes a subject’s tokens issued before the instant, not after', async () => {
    const early = user({ issuedAt: 1_000 });
    await redis.set(revocationKey('sub', subjectOf(early)), '1500', 'EX', 60);
    expect(await isRevoked(early, KID)).toBe(true);
    const later = { ...early, issuedAt: 1_500, tokenId: randomUUID() } as Principal;
    expect(await isRevoked(later, KID)).toBe(false);
  });

  it('fails closed with 503 when Redis cannot be asked', async () => {
    const dead = new Redis(`redis://127.0.0.1:${await freePort()}`, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      disconnectTimeout: 50,
    });
    dead.on('error', () => undefined);
    await expect(redisRevocationCheck(dead)(user(), KID)).rejects.toBeInstanceOf(UnavailableError);
    dead.disconnect();
  });
});

describe('redisRevocationCheck on a service’s auto-pipelined client (verifierRedisOptions)', () => {
  const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const redis = new Redis(url, verifierRedisOptions(url));
  const writer = new Redis(url, { lazyConnect: true });
  const isRevoked = redisRevocationCheck(redis);
  beforeAll(() => Promise.all([redis.connect(), writer.connect()]));
  afterAll(() => Promise.all([redis.quit(), writer.quit()]));

  it('answers each of many concurrent checks for its own token, sharing pipelines', async () => {
    const principals = Array.from({ length: 30 }, () => user());
    const revoked = new Set([3, 11, 29]);
    for (const i of revoked) await writer.set(revocationKey('jti', principals[i]!.tokenId), '1', 'EX', 60);
    const checks = principals.map((p) => isRevoked(p, KID));
    // The MGETs wait in one auto-pipeline queue and leave in one write.
    expect(redis.autoPipelineQueueSize).toBeGreaterThan(1);
    expect(await Promise.all(checks)).toEqual(principals.map((_, i) => revoked.has(i)));
  });

  it('refuses a token on the first check after its revocation is stored', async () => {
    const p = user();
    expect(await isRevoked(p, KID)).toBe(false);
    await writer.set(revocationKey('sid', (p as { sessionId: string }).sessionId), '1', 'EX', 60);
    expect(await isRevoked(p, KID)).toBe(true);
  });

  it('fails closed with 503 when Redis cannot be asked', async () => {
    const deadUrl = `redis://127.0.0.1:${await freePort()}`;
    // The options as services use them: reconnecting, one retry per command, then the error.
    const dead = new Redis(deadUrl, { ...verifierRedisOptions(deadUrl), disconnectTimeout: 50 });
    dead.on('error', () => undefined);
    await expect(redisRevocationCheck(dead)(user(), KID)).rejects.toBeInstanceOf(UnavailableError);
    dead.disconnect();
  });
});

describe('redisRevocationCheck with requirePublished (against Redis)', () => {
  // A logical database of its own: the published marker is one fixed key.
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: true, db: 14 });
  const isRevoked = redisRevocationCheck(redis, { requirePublished: true });
  beforeAll(() => redis.connect());
  afterAll(async () => {
    await redis.del(REVOCATIONS_PUBLISHED_KEY);
    await redis.quit();
  });

  it('refuses (503) while the list has not been republished into an empty Redis, then checks as usual', async () => {
    await redis.del(REVOCATIONS_PUBLISHED_KEY);
    await expect(isRevoked(user(), KID)).rejects.toBeInstanceOf(UnavailableError);
    await redis.set(REVOCATIONS_PUBLISHED_KEY, new Date().toISOString());
    expect(await isRevoked(user(), KID)).toBe(false);
    const a = user();
    await redis.set(revocationKey('jti', a.tokenId), '1', 'EX', 60);
    expect(await isRevoked(a, KID)).toBe(true);
    expect(await redisAnswers(redis)).toBe(true);
  });
});

describe('redisRevocationCheck outcomes (custos_token_revocation_checks_total)', () => {
  const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const redis = new Redis(url, { lazyConnect: true, db: 13 });
  beforeAll(() => redis.connect());
  afterAll(async () => {
    await redis.del(REVOCATIONS_PUBLISHED_KEY);
    await redis.quit();
  });

  /** The counter's value per outcome, as the service's /metrics shows it. */
  async function counts(metrics: ReturnType<typeof createMetrics>): Promise<Record<string, number>> {
    const m = await metrics.tokenRevocationChecks.get();
    return Object.fromEntries(m.values.map((v) => [String(v.labels.outcome), v.value]));
  }

  it('counts passed, revoked and failed checks (Redis down, list not restored)', async () => {
    const metrics = createMetrics('revocation-test');
    expect(await counts(metrics)).toEqual({ passed: 0, revoked: 0, failed: 0 });
    const isRevoked = redisRevocationCheck(redis, {
      requirePublished: true,
      outcomes: metrics.tokenRevocationChecks,
    });
    await redis.del(REVOCATIONS_PUBLISHED_KEY);
    await expect(isRevoked(user(), KID)).rejects.toBeInstanceOf(UnavailableError);
    await redis.set(REVOCATIONS_PUBLISHED_KEY, new Date().toISOString());
    expect(await isRevoked(user(), KID)).toBe(false);
    expect(await isRevoked(user(), KID)).toBe(false);
    const a = user();
    await redis.set(revocationKey('jti', a.tokenId), '1', 'EX', 60);
    expect(await isRevoked(a, KID)).toBe(true);

    const dead = new Redis(`redis://127.0.0.1:${await freePort()}`, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      disconnectTimeout: 50,
    });
    dead.on('error', () => undefined);
    const deadCheck = redisRevocationCheck(dead, { outcomes: metrics.tokenRevocationChecks });
    await expect(deadCheck(user(), KID)).rejects.toBeInstanceOf(UnavailableError);
    dead.disconnect();

    expect(await counts(metrics)).toEqual({ passed: 2, revoked: 1, failed: 2 });
    expect(await metrics.registry.metrics()).toContain(
      'custos_token_revocation_checks_total{outcome="failed",service="revocation-test"} 2',
    );
  });
});
