/** A bounded least-recently-used map whose entries also expire at their own deadline. */
export class ExpiringLru<V> {
  // A Map iterates in insertion order: re-inserting on read keeps the least recently used first.
  private readonly entries = new Map<string, { value: V; expiresAtMs: number }>();

  constructor(readonly maxEntries: number) {}

  /** The live value under `key`, marking it recently used; expired entries are dropped. */
  get(key: string, nowMs: number): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (entry.expiresAtMs <= nowMs) return undefined;
    this.entries.set(key, entry);
    return entry.value;
  }

  /** Stores `value` until `expiresAtMs`, evicting the least recently used entry when full. */
  set(key: string, value: V, expiresAtMs: number): void {
    if (this.maxEntries <= 0) return;
    this.entries.delete(key);
    while (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (oldest.done) break;
      this.entries.delete(oldest.value);
    }
    this.entries.set(key, { value, expiresAtMs });
  }

  /** Forgets the entry under `key`. */
  delete(key: string): void {
    this.entries.delete(key);
  }

  /** How many entries are held (expired ones included until they are read or evicted). */
  get size(): number {
    return this.entries.size;
  }
}
