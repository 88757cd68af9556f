import { randomBytes } from 'node:crypto';

/** secp256k1's group order: a private key is an integer in [1, n-1]. */
export const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/**
 * 32 random bytes that are a valid secp256k1 private key (EVM, Bitcoin, Tron keys); the caller
 * zeroes them when done. A draw outside [1, n-1] (about 1 in 2^128) is zeroed and drawn again.
 */
export function randomSecp256k1PrivateKey(): Buffer {
  for (;;) {
    const k = randomBytes(32);
    const n = BigInt(`0x${k.toString('hex')}`);
    if (n !== 0n && n < SECP256K1_N) return k;
    k.fill(0);
  }
}
