import { ExpiringLru } from './expiring-lru';

describe('ExpiringLru', () => {
  it('returns a value until its deadline and forgets it after', () => {
    const lru = new ExpiringLru<string>(10);
    lru.set('a', 'A', 1_000);
    expect(lru.get('a', 999)).toBe('A');
    expect(lru.get('a', 1_000)).toBeUndefined();
    expect(lru.size).toBe(0);
  });

  it('evicts the least recently used entry when full', () => {
    const lru = new ExpiringLru<string>(2);
    lru.set('a', 'A', 10);
    lru.set('b', 'B', 10);
    expect(lru.get('a', 0)).toBe('A'); // a is now the most recently used
    lru.set('c', 'C', 10);
    expect(lru.get('b', 0)).toBeUndefined();
    expect(lru.get('a', 0)).toBe('A');
    expect(lru.get('c', 0)).toBe('C');
    expect(lru.size).toBe(2);
  });

  it('never grows past its bound', () => {
    const lru = new ExpiringLru<number>(100);
    for (let i = 0; i < 1_000; i++) lru.set(String(i), i, 10);
    expect(lru.size).toBe(100);
    expect(lru.get('899', 0)).toBeUndefined();
    expect(lru.get('900', 0)).toBe(900);
  });

  it('replaces the value of a key set twice', () => {
    const lru = new ExpiringLru<string>(2);
    lru.set('a', 'A', 10);
    lru.set('a', 'A2', 20);
    expect(lru.size).toBe(1);
    expect(lru.get('a', 15)).toBe('A2');
  });

  it('holds nothing when its size is 0', () => {
    const lru = new ExpiringLru<string>(0);
    lru.set('a', 'A', 10);
    expect(lru.get('a', 0)).toBeUndefined();
    expect(lru.size).toBe(0);
  });

  it('forgets a deleted key', () => {
    const lru = new ExpiringLru<string>(2);
    lru.set('a', 'A', 10);
    lru.delete('a');
    expect(lru.get('a', 0)).toBeUndefined();
  });
});

describe('ExpiringLru onEvict', () => {
  it('hands every value that leaves the map to onEvict exactly once', () => {
    const gone: string[] = [];
    const lru = new ExpiringLru<string>(2, (v) => gone.push(v));
    lru.set('a', 'A', 100);
    lru.set('b', 'B', 100);
    lru.set('c', 'C', 100); // evicts a
    lru.set('b', 'B2', 100); // replaces B
    expect(lru.get('c', 200)).toBeUndefined(); // expired
    lru.delete('b');
    lru.delete('b');
    expect(gone).toEqual(['A', 'B', 'C', 'B2']);
  });
});
