/** A bounded least-recently-used map whose entries also expire at their own deadline. */
export class ExpiringLru<V> {
  // A Map iterates in insertion order: re-inserting on read keeps the least recently used first.
  private readonly entries = new Map<string, { value: V; expiresAtMs: number }>();

  /** `onEvict` sees every value that leaves the map (expired, evicted, replaced or deleted), e.g. to zero it. */
  constructor(
    readonly maxEntries: number,
    private readonly onEvict?: (value: V) => void,
  ) {}

  /** The live value under `key`, marking it recently used; expired entries are dropped. */
  get(key: string, nowMs: number): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (entry.expiresAtMs <= nowMs) {
      this.onEvict?.(entry.value);
      return undefined;
    }
    this.entries.set(key, entry);
    return entry.value;
  }

  /** Stores `value` until `expiresAtMs`, evicting the least recently used entry when full. */
  set(key: string, value: V, expiresAtMs: number): void {
    if (this.maxEntries <= 0) return;
    this.delete(key);
    while (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (oldest.done) break;
      this.delete(oldest.value);
    }
    this.entries.set(key, { value, expiresAtMs });
  }

  /** Forgets the entry under `key`. */
  delete(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.onEvict?.(entry.value);
  }

  /** Forgets every entry. */
  clear(): void {
    for (const key of [...this.entries.keys()]) this.delete(key);
  }

  /** How many entries are held (expired ones included until they are read or evicted). */
  get size(): number {
    return this.entries.size;
  }
}
