/**
 * What a wrong-secret key exchange gets, from how many wrong secrets its key has had in the current
 * minute (this one included): within the limit, the usual audited 401; the first one over it, 429
 * and one `auth.exchange_refusals_limited` record for the rest of the minute; the ones after that,
 * 429 and no record. So wrong secrets sent from many addresses cost at most limit + 1 records a
 * minute per key, while the key's right secret is never refused by this.
 */
export type WrongSecretVerdict = 'audit' | 'limit' | 'limited';

/** The verdict of the `count`-th wrong secret of a key in its minute, with `perMinute` audited. */
export function wrongSecretVerdict(count: number, perMinute: number): WrongSecretVerdict {
  if (!Number.isFinite(count) || count <= perMinute) return 'audit';
  return count === perMinute + 1 ? 'limit' : 'limited';
}

/** Seconds until the key's minute ends (at least 1), from the bucket's remaining milliseconds. */
export function retryAfterSeconds(ttlMs: number, windowMs: number): number {
  const ms = ttlMs > 0 ? Math.min(ttlMs, windowMs) : windowMs;
  return Math.max(1, Math.ceil(ms / 1000));
}
