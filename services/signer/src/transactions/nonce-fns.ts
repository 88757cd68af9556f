/** What the database holds for one key on one chain, and what the chain says now. */
export interface NonceState {
  /** The chain's `eth_getTransactionCount(address, 'pending')`, read before the allocation. */
  chainPending: number;
  /** The next nonce signer has not given out yet (0 when none was). */
  storedNext: number;
  /** Nonces given out to transactions that never reached the node, given back. */
  released: readonly number[];
}

/** The nonce to use, the next stored value, and the released nonces to drop. */
export interface NonceAllocation {
  nonce: number;
  next: number;
  /** Released nonces the allocation consumes or that the chain passed (all deleted). */
  drop: number[];
}

/**
 * Picks the next nonce of a key on a chain (pure; the caller holds the row lock). A released nonce
 * the chain has not passed is reused first, lowest first, so a transaction that failed before
 * reaching the node leaves no gap. Otherwise the stored next nonce is used, raised to the chain's
 * pending nonce when the chain is ahead (the key sent transactions signer did not make). Released
 * nonces below the chain's pending nonce were used by someone else meanwhile and are dropped.
 */
export function allocateNonce(s: NonceState): NonceAllocation {
  const stale = s.released.filter((n) => n < s.chainPending);
  const usable = s.released.filter((n) => n >= s.chainPending && n < Math.max(s.storedNext, s.chainPending));
  const beyond = s.released.filter((n) => n >= Math.max(s.storedNext, s.chainPending));
  const base = Math.max(s.storedNext, s.chainPending);
  if (usable.length > 0) {
    const nonce = Math.min(...usable);
    return { nonce, next: base, drop: [...stale, ...beyond, nonce] };
  }
  return { nonce: base, next: base + 1, drop: [...stale, ...beyond] };
}
