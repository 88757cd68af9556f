import { generateKeyPairSync, randomUUID } from 'node:crypto';
import type { JWK } from 'jose';
import { CachedJwks, type CachedJwksOptions } from '../src/index.js';
import { FakeClock, ed25519Key } from './fixtures/tokens.js';

function counted(published: () => JWK[] | Promise<JWK[]>) {
  const calls = { count: 0 };
  const fetchJwks = async () => {
    calls.count++;
    return { keys: await published() };
  };
  return { calls, fetchJwks };
}

function cache(
  fetchJwks: CachedJwksOptions['fetchJwks'],
  clock: FakeClock,
  opts: Partial<CachedJwksOptions> = {},
) {
  return new CachedJwks({ fetchJwks, ttlMs: 60_000, minRefreshIntervalMs: 5_000, now: clock.now, ...opts });
}

describe('CachedJwks', () => {
  it('fetches once and then serves keys from memory', async () => {
    const clock = new FakeClock();
    const key = ed25519Key();
    const { calls, fetchJwks } = counted(() => [key.jwk]);
    const jwks = cache(fetchJwks, clock);
    const first = await jwks.getKey(key.kid);
    expect(first?.equals(key.publicKey)).toBe(true);
    for (let i = 0; i < 10; i++) expect(await jwks.getKey(key.kid)).toBe(first);
    expect(calls.count).toBe(1);
  });

  it('refetches at most once per minRefreshInterval under a flood of unknown kids', async () => {
    const clock = new FakeClock();
    const key = ed25519Key();
    const { calls, fetchJwks } = counted(() => [key.jwk]);
    const jwks = cache(fetchJwks, clock);
    await jwks.getKey(key.kid);
    expect(calls.count).toBe(1);

    clock.advance(5_000);
    const flood = await Promise.all(Array.from({ length: 500 }, () => jwks.getKey(randomUUID())));
    expect(flood.every((k) => k === undefined)).toBe(true);
    for (let i = 0; i < 500; i++) expect(await jwks.getKey(randomUUID())).toBeUndefined();
    expect(calls.count).toBe(2);

    clock.advance(4_999);
    await jwks.getKey(randomUUID());
    expect(calls.count).toBe(2);
    clock.advance(1);
    await jwks.getKey(randomUUID());
    expect(calls.count).toBe(3);
    // The known key is still served without a fetch.
    expect(await jwks.getKey(key.kid)).toBeDefined();
    expect(calls.count).toBe(3);
  });

  it('makes concurrent callers share one fetch', async () => {
    const clock = new FakeClock();
    const key = ed25519Key();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { calls, fetchJwks } = counted(async () => {
      await gate;
      return [key.jwk];
    });
    const jwks = cache(fetchJwks, clock);
    const lookups = Array.from({ length: 50 }, (_, i) => jwks.getKey(i % 2 ? key.kid : 'unknown'));
    await new Promise((r) => setImmediate(r));
    expect(calls.count).toBe(1);
    release();
    const keys = await Promise.all(lookups);
    expect(calls.count).toBe(1);
    expect(keys.filter((k) => k !== undefined)).toHaveLength(25);
  });

  it('refetches when the TTL has passed and picks up new and dropped keys', async () => {
    const clock = new FakeClock();
    const a = ed25519Key();
    const b = ed25519Key();
    let published = [a.jwk];
    const { calls, fetchJwks } = counted(() => published);
    const jwks = cache(fetchJwks, clock);
    expect(await jwks.getKey(a.kid)).toBeDefined();
    published = [b.jwk];
    clock.advance(59_999);
    expect(await jwks.getKey(a.kid)).toBeDefined();
    expect(calls.count).toBe(1);
    clock.advance(1);
    expect(await jwks.getKey(a.kid)).toBeUndefined();
    expect(await jwks.getKey(b.kid)).toBeDefined();
    expect(calls.count).toBe(2);
  });

  it('keeps serving the last good keys while refreshes fail, until they are maxStale old', async () => {
    const clock = new FakeClock();
    const key = ed25519Key();
    let up = true;
    const errors: unknown[] = [];
    const { calls, fetchJwks } = counted(() => {
      if (!up) throw new Error('identity down');
      return [key.jwk];
    });
    const jwks = cache(fetchJwks, clock, { onFetchError: (e) => errors.push(e) });
    await jwks.getKey(key.kid);
    up = false;
    clock.advance(60_000); // TTL passed: the refresh fails, the old key is still served
    expect(await jwks.getKey(key.kid)).toBeDefined();
    expect(calls.count).toBe(2);
    expect(errors).toHaveLength(1);
    clock.advance(59_999); // just under 2 × TTL
    expect(await jwks.getKey(key.kid)).toBeDefined();
    clock.advance(1);
    await expect(jwks.getKey(key.kid)).rejects.toMatchObject({ kind: 'unavailable' });
    up = true;
    clock.advance(5_000);
    expect(await jwks.getKey(key.kid)).toBeDefined();
  });

  it('fails with UnavailableError, rate-limited, when the first fetch fails', async () => {
    const clock = new FakeClock();
    const { calls, fetchJwks } = counted(() => {
      throw new Error('identity down');
    });
    const jwks = cache(fetchJwks, clock);
    await expect(jwks.getKey('k')).rejects.toMatchObject({ kind: 'unavailable' });
    await expect(jwks.getKey('k')).rejects.toMatchObject({ kind: 'unavailable' });
    expect(calls.count).toBe(1);
  });

  it('treats a document without a keys array as a failed fetch', async () => {
    const clock = new FakeClock();
    const key = ed25519Key();
    let doc: unknown = { keys: [key.jwk] };
    const jwks = cache(async () => doc as { keys: JWK[] }, clock);
    await jwks.getKey(key.kid);
    doc = { error: 'oops' };
    clock.advance(60_000);
    expect(await jwks.getKey(key.kid)).toBeDefined();
  });

  it('accepts only Ed25519 public keys that carry a kid', async () => {
    const clock = new FakeClock();
    const good = ed25519Key('good');
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({
      format: 'jwk',
    }) as JWK;
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' }) as JWK;
    const x25519 = generateKeyPairSync('x25519').publicKey.export({ format: 'jwk' }) as JWK;
    const withPrivate = ed25519Key('with-private');
    const { calls, fetchJwks } = counted(() => [
      good.jwk,
      { ...rsa, kid: 'rsa', alg: 'RS256' },
      { ...ec, kid: 'ec' },
      { ...x25519, kid: 'x25519' },
      { ...ed25519Key().jwk, kid: undefined },
      { ...ed25519Key().jwk, kid: '' },
      { ...ed25519Key().jwk, kid: 'alg-rs256', alg: 'RS256' },
      { ...ed25519Key().jwk, kid: 'use-enc', use: 'enc' },
      { kty: 'OKP', crv: 'Ed25519', x: 'not-a-key', kid: 'bad-x' },
      { kty: 'oct', k: 'c2VjcmV0', kid: 'oct' },
      { ...(withPrivate.privateKey.export({ format: 'jwk' }) as JWK), kid: 'with-private' },
      { ...ed25519Key().jwk, kid: 'good' }, // a duplicate kid does not replace the first
    ]);
    const jwks = cache(fetchJwks, clock);
    expect((await jwks.getKey('good'))?.equals(good.publicKey)).toBe(true);
    for (const kid of ['rsa', 'ec', 'x25519', 'alg-rs256', 'use-enc', 'bad-x', 'oct', '']) {
      expect(await jwks.getKey(kid)).toBeUndefined();
    }
    const fromPrivate = await jwks.getKey('with-private');
    expect(fromPrivate?.type).toBe('public');
    expect(fromPrivate?.equals(withPrivate.publicKey)).toBe(true);
    expect(calls.count).toBe(1);
  });
});
