import { DecisionCache, type GenerationReader } from './decision-cache';

/** Generations as Redis would hold them; `down` makes every read fail as a lost connection does. */
class Generations implements GenerationReader {
  readonly values = new Map<string, string>();
  down = false;
  async get(key: string): Promise<string | null> {
    if (this.down) throw new Error('connection lost');
    return this.values.get(key) ?? null;
  }
}

const ORG = '6f0c7e7a-4bd1-4a43-9a55-4a0f7f1b2c3d';

describe('DecisionCache', () => {
  let clock = 0;
  const now = () => clock;
  beforeEach(() => {
    clock = 1_000_000;
  });

  it('reuses an answer under the generation it was fetched with, and drops it once the generation moves', async () => {
    const gens = new Generations();
    const cache = new DecisionCache(gens, { ttlMs: 5000, size: 10 }, now);
    const g0 = await cache.generation(ORG);
    expect(g0).toBe('0');
    cache.set('q', g0!, true, 86_400_000);
    expect(cache.get('q', g0!)).toBe(true);
    gens.values.set(`custos:policy:gen:${ORG}`, '1');
    const g1 = await cache.generation(ORG);
    expect(cache.get('q', g1!)).toBeUndefined();
    // Dropped, not just hidden: the old generation does not bring it back.
    expect(cache.get('q', g0!)).toBeUndefined();
  });

  it('keeps an answer no longer than the TTL, nor than policy declared it stable', () => {
    const cache = new DecisionCache(new Generations(), { ttlMs: 5000, size: 10 }, now);
    cache.set('long', '0', true, 86_400_000);
    cache.set('short', '0', false, 1200);
    clock += 1199;
    expect(cache.get('short', '0')).toBe(false);
    clock += 1;
    expect(cache.get('short', '0')).toBeUndefined();
    expect(cache.get('long', '0')).toBe(true);
    clock += 3800;
    expect(cache.get('long', '0')).toBeUndefined();
  });

  it("counts an answer's life from when the question was asked, not from when the answer came", () => {
    const cache = new DecisionCache(new Generations(), { ttlMs: 5000, size: 10 }, now);
    const askedAt = cache.clock();
    clock += 300; // the round trip to policy
    cache.set('q', '0', true, 1000, askedAt);
    clock += 699;
    expect(cache.get('q', '0')).toBe(true);
    clock += 1;
    expect(cache.get('q', '0')).toBeUndefined();
  });

  it('keeps nothing that policy says to ask again (cacheable_for_ms 0), nor when disabled', () => {
    const cache = new DecisionCache(new Generations(), { ttlMs: 5000, size: 10 }, now);
    cache.set('ip-bound', '0', true, 0);
    expect(cache.get('ip-bound', '0')).toBeUndefined();
    const off = new DecisionCache(new Generations(), { ttlMs: 0, size: 10 }, now);
    expect(off.enabled).toBe(false);
    off.set('q', '0', true, 86_400_000);
    expect(off.get('q', '0')).toBeUndefined();
  });

  it('says nothing when Redis cannot say (the caller then asks policy)', async () => {
    const gens = new Generations();
    gens.down = true;
    const cache = new DecisionCache(gens, { ttlMs: 5000, size: 10 }, now);
    expect(await cache.generation(ORG)).toBeUndefined();
  });

  it('is bounded: the least recently used answer goes first', () => {
    const cache = new DecisionCache(new Generations(), { ttlMs: 5000, size: 2 }, now);
    cache.set('a', '0', true, 10_000);
    cache.set('b', '0', true, 10_000);
    expect(cache.get('a', '0')).toBe(true);
    cache.set('c', '0', true, 10_000);
    expect(cache.get('b', '0')).toBeUndefined();
    expect(cache.get('a', '0')).toBe(true);
    expect(cache.get('c', '0')).toBe(true);
  });
});
