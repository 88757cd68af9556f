import { ExpiringLru } from '@custos/service-kit';
import type { VaultCryptoClient } from '../peers/vault-crypto-client.js';
import type { SigningKeyRecord } from './key-types.js';

/** How long an opened key stays in signer's memory, and how many at most. */
export interface KeyCacheOptions {
  ttlMs: number;
  size: number;
  now?: () => number;
}

/**
 * The private halves signer signs with. A key is opened by vault-crypto (`LoadAgentKey`, audited
 * there as `secret.agent_key_loaded`) on first use and kept in memory for a short time, so a burst of
 * signatures costs one load; a cached buffer is zeroed when it expires or is evicted, and each use
 * works on its own copy (taken before anything can zero the cached one), zeroed after. Concurrent first uses of one key share one load. Export never
 * uses or fills the cache. A rotated key's new version has a new id, so it is never served stale.
 */
export class KeyLoader {
  private readonly cache: ExpiringLru<Buffer>;
  private readonly inflight = new Map<string, Promise<Buffer>>();
  /** Keys forgotten while a load of them was in flight: that load does not fill the cache. */
  private readonly forgotten = new Set<string>();
  private readonly now: () => number;

  constructor(
    private readonly vault: Pick<VaultCryptoClient, 'loadKey'>,
    private readonly options: KeyCacheOptions,
  ) {
    this.cache = new ExpiringLru(options.size, (b) => b.fill(0));
    this.now = options.now ?? Date.now;
  }

  /** Runs `fn` with a copy of the key's private half (zeroed when `fn` settles). */
  async withKey<T>(key: SigningKeyRecord, fn: (privateKey: Buffer) => T | Promise<T>): Promise<T> {
    const copy = this.caching()
      ? await this.copyOf(key)
      : await this.vault.loadKey({
          orgId: key.orgId,
          secretId: key.vaultSecretId,
          keyId: key.id,
          purpose: 'sign',
        });
    try {
      return await fn(copy);
    } finally {
      copy.fill(0);
    }
  }

  /** The private half for an export (never cached); the caller zeroes it. */
  async exported(key: SigningKeyRecord): Promise<Buffer> {
    return this.vault.loadKey({
      orgId: key.orgId,
      secretId: key.vaultSecretId,
      keyId: key.id,
      purpose: 'export',
    });
  }

  /**
   * Drops a key from memory (zeroing it), e.g. after an import replaced it; a load of it still in
   * flight does not put it back (it serves its waiters only).
   */
  forget(keyId: string): void {
    this.cache.delete(keyId);
    if (this.inflight.has(keyId)) this.forgotten.add(keyId);
  }

  private caching(): boolean {
    return this.options.size > 0 && this.options.ttlMs > 0;
  }

  /**
   * A copy of the key's private half that nothing else zeroes. A cache hit is copied at once (no
   * await between the lookup and the copy, so neither an expiry nor an eviction by a concurrent
   * request can zero it first). A load is shared by concurrent first uses: its result (the master)
   * is never in the cache — the cache gets a copy of its own — and each waiter copies it in the
   * microtasks that follow the load, before the master is zeroed on the next turn of the loop.
   */
  private async copyOf(key: SigningKeyRecord): Promise<Buffer> {
    const hit = this.cache.get(key.id, this.now());
    if (hit) return Buffer.from(hit);
    let pending = this.inflight.get(key.id);
    if (!pending) {
      pending = this.vault
        .loadKey({ orgId: key.orgId, secretId: key.vaultSecretId, keyId: key.id, purpose: 'sign' })
        .then((master) => {
          if (!this.forgotten.delete(key.id))
            this.cache.set(key.id, Buffer.from(master), this.now() + this.options.ttlMs);
          setImmediate(() => master.fill(0));
          return master;
        })
        .finally(() => {
          this.inflight.delete(key.id);
          this.forgotten.delete(key.id);
        });
      this.inflight.set(key.id, pending);
    }
    return Buffer.from(await pending);
  }
}
