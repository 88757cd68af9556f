import { createPublicKey, type KeyObject, type webcrypto } from 'node:crypto';
import { UnavailableError } from '@custos/service-kit';
import type { JWK } from 'jose';

/** Where a verifier finds the public key a token names in its `kid` header. */
export interface JwksSource {
  /** The verification key with this id, or undefined when the issuer does not publish it. */
  getKey(kid: string): Promise<webcrypto.CryptoKey | KeyObject | undefined>;
}

/** Options of a CachedJwks. */
export interface CachedJwksOptions {
  /** Fetches the identity service's JWKS document (e.g. over gRPC or `/.well-known/jwks.json`). */
  fetchJwks: () => Promise<{ keys: JWK[] }>;
  /** How long a fetched key set is used before it is refreshed; SPEC's 5-minute JWKS cache. */
  ttlMs?: number;
  /** The least time between two fetch attempts, whatever triggers them. */
  minRefreshIntervalMs?: number;
  /**
   * How long the last good key set keeps being served while refreshes fail (identity down);
   * past this age every lookup fails with UnavailableError. Default: twice `ttlMs`.
   */
  maxStaleMs?: number;
  /** Told about every failed fetch (to log it); the cache itself carries on with its old keys. */
  onFetchError?: (err: unknown) => void;
  /** The clock, in milliseconds since the epoch. */
  now?: () => number;
}

/** Imports the Ed25519 signing keys of a JWKS document; any other entry is skipped, not fatal. */
export function importEd25519Keys(jwks: { keys: readonly JWK[] }): Map<string, KeyObject> {
  const keys = new Map<string, KeyObject>();
  for (const jwk of jwks.keys) {
    if (typeof jwk !== 'object' || jwk === null) continue;
    const { kty, crv, x, kid, alg, use } = jwk;
    if (kty !== 'OKP' || crv !== 'Ed25519' || typeof x !== 'string') continue;
    if (typeof kid !== 'string' || kid.length === 0 || keys.has(kid)) continue;
    if ((alg !== undefined && alg !== 'EdDSA') || (use !== undefined && use !== 'sig')) continue;
    try {
      // Only the public members are passed on, so a JWK that leaks `d` still yields a public key.
      keys.set(kid, createPublicKey({ key: { kty, crv, x }, format: 'jwk' }));
    } catch {
      // A malformed `x` disqualifies that key only.
    }
  }
  return keys;
}

/**
 * A JwksSource that caches the issuer's keys by `kid`. The key set is refreshed after `ttlMs`, and
 * early when a token names an unknown kid (key rotation). Fetch attempts are at least
 * `minRefreshIntervalMs` apart so a flood of random kids cannot hammer identity, and concurrent
 * callers share one fetch. A failed refresh keeps the last good keys until they are `maxStaleMs`
 * old; with no usable key set a lookup throws UnavailableError (a 503, not a 401: the token may
 * well be valid).
 */
export class CachedJwks implements JwksSource {
  private readonly ttlMs: number;
  private readonly minRefreshIntervalMs: number;
  private readonly maxStaleMs: number;
  private readonly now: () => number;
  private keys = new Map<string, KeyObject>();
  private fetchedAtMs: number | undefined;
  private lastAttemptAtMs: number | undefined;
  private inflight: Promise<void> | undefined;

  constructor(private readonly options: CachedJwksOptions) {
    this.ttlMs = options.ttlMs ?? 300_000;
    this.minRefreshIntervalMs = options.minRefreshIntervalMs ?? 5_000;
    this.maxStaleMs = options.maxStaleMs ?? this.ttlMs * 2;
    this.now = options.now ?? Date.now;
  }

  /** The key with this id, refreshing the key set when it is old or does not know the id. */
  async getKey(kid: string): Promise<KeyObject | undefined> {
    if (this.fetchedAtMs === undefined || this.now() - this.fetchedAtMs >= this.ttlMs) {
      await this.refresh();
    }
    this.assertUsable();
    const key = this.keys.get(kid);
    if (key) return key;
    await this.refresh();
    this.assertUsable();
    return this.keys.get(kid);
  }

  // Joins the fetch in flight, or starts one unless the last attempt was too recent.
  private refresh(): Promise<void> {
    if (this.inflight) return this.inflight;
    const now = this.now();
    if (this.lastAttemptAtMs !== undefined && now - this.lastAttemptAtMs < this.minRefreshIntervalMs) {
      return Promise.resolve();
    }
    this.lastAttemptAtMs = now;
    this.inflight = this.fetchKeys().finally(() => {
      this.inflight = undefined;
    });
    return this.inflight;
  }

  private async fetchKeys(): Promise<void> {
    try {
      const jwks = await this.options.fetchJwks();
      if (!Array.isArray(jwks?.keys)) throw new TypeError('JWKS document has no "keys" array');
      this.keys = importEd25519Keys(jwks);
      this.fetchedAtMs = this.now();
    } catch (err) {
      // Keep serving the last good key set; assertUsable decides when it is too old.
      this.options.onFetchError?.(err);
    }
  }

  private assertUsable(): void {
    if (this.fetchedAtMs === undefined || this.now() - this.fetchedAtMs >= this.maxStaleMs) {
      throw new UnavailableError('token signing keys are unavailable');
    }
  }
}
