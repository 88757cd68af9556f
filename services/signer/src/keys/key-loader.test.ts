import { randomBytes } from 'node:crypto';
import { KeyLoader } from './key-loader';
import type { SigningKeyRecord } from './key-types';

function record(id: string): SigningKeyRecord {
  return { id, orgId: 'org', vaultSecretId: `secret-${id}` } as unknown as SigningKeyRecord;
}

/**
 * vault-crypto's LoadAgentKey as the loader sees it: a fresh buffer of the stored key per call,
 * every load in flight answered at the same instant (as when several answers arrive in one read).
 */
function vaultOf(keys: Record<string, Buffer>, delayMs = 5) {
  const loads: string[] = [];
  let gate: Promise<void> | undefined;
  return {
    loads,
    vault: {
      loadKey: async (r: { keyId: string }) => {
        loads.push(r.keyId);
        gate ??= new Promise<void>((res) => setTimeout(res, delayMs)).finally(() => (gate = undefined));
        await gate;
        return Buffer.from(keys[r.keyId]!);
      },
    },
  };
}

const seen = (l: KeyLoader, k: SigningKeyRecord, holdMs = 0) =>
  l.withKey(k, async (pk) => {
    await new Promise((res) => setTimeout(res, holdMs));
    return pk.toString('hex');
  });

describe('KeyLoader', () => {
  const a = randomBytes(32);
  const b = randomBytes(32);

  it('shares one load between concurrent first uses, each with the key', async () => {
    const v = vaultOf({ a, b });
    const l = new KeyLoader(v.vault, { ttlMs: 60_000, size: 10 });
    const r = await Promise.all(Array.from({ length: 8 }, () => seen(l, record('a'), 2)));
    expect(new Set(r)).toEqual(new Set([a.toString('hex')]));
    expect(v.loads).toEqual(['a']);
    expect(await seen(l, record('a'))).toBe(a.toString('hex'));
    expect(v.loads).toEqual(['a']);
  });

  it('a use that found the key keeps it when the next lookup finds it expired and zeroes it', async () => {
    let now = 0;
    const v = vaultOf({ a });
    const l = new KeyLoader(v.vault, { ttlMs: 1000, size: 10, now: () => now });
    await seen(l, record('a'));
    const first = seen(l, record('a')); // a hit
    now = 5000; // before the first use has run on: this lookup finds the entry expired
    const second = seen(l, record('a'));
    expect([await first, await second]).toEqual([a.toString('hex'), a.toString('hex')]);
    expect(v.loads).toEqual(['a', 'a']);
  });

  it('keys loaded at once into a cache of one are each right (an eviction zeroes only the cached copy)', async () => {
    const v = vaultOf({ a, b });
    const l = new KeyLoader(v.vault, { ttlMs: 60_000, size: 1 });
    const [ra, rb] = await Promise.all([seen(l, record('a'), 5), seen(l, record('b'), 5)]);
    expect([ra, rb]).toEqual([a.toString('hex'), b.toString('hex')]);
  });

  it('opens the key for every use when caching is off, and hands out copies only', async () => {
    const v = vaultOf({ a });
    const l = new KeyLoader(v.vault, { ttlMs: 0, size: 10 });
    expect(await seen(l, record('a'))).toBe(a.toString('hex'));
    expect(await seen(l, record('a'))).toBe(a.toString('hex'));
    expect(v.loads).toEqual(['a', 'a']);
    let kept: Buffer | undefined;
    await l.withKey(record('a'), (pk) => {
      kept = pk;
    });
    expect(kept!.equals(Buffer.alloc(32))).toBe(true); // zeroed after use
  });

  it('forget drops the key, also when a load of it is in flight (that load serves its waiters only)', async () => {
    const v = vaultOf({ a });
    const l = new KeyLoader(v.vault, { ttlMs: 60_000, size: 10 });
    const during = seen(l, record('a'));
    l.forget('a');
    expect(await during).toBe(a.toString('hex'));
    expect(await seen(l, record('a'))).toBe(a.toString('hex'));
    expect(v.loads).toEqual(['a', 'a']); // opened again: the first load did not fill the cache
    l.forget('a');
    await seen(l, record('a'));
    expect(v.loads).toEqual(['a', 'a', 'a']);
  });
});
