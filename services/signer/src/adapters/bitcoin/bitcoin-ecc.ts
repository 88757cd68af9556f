import { Signature, SigningKey, getBytes, hexlify } from 'ethers';

// secp256k1 for bitcoinjs-lib over ethers 6 (its audited noble-curves build, CommonJS).
//
// Why not @bitcoinerlab/secp256k1 (pinned in package.json): its 2.0.0 loads @noble/curves 2,
// an ES-module-only package, which the jest preset's CommonJS runtime cannot load
// (transformIgnorePatterns transforms only jose and @nats-io). Importing it here would break every
// signer test that imports the adapter registry. ethers is already signer's, and gives the same
// curve arithmetic (RFC 6979 deterministic, low-S signatures).

/** secp256k1's field prime and group order. */
const P = 0xfffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc2fn;
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

function toBig(b: Uint8Array): bigint {
  return b.length === 0 ? 0n : BigInt(`0x${Buffer.from(b).toString('hex')}`);
}

function modPow(b: bigint, e: bigint, m: bigint): bigint {
  let r = 1n;
  b %= m;
  while (e > 0n) {
    if (e & 1n) r = (r * b) % m;
    b = (b * b) % m;
    e >>= 1n;
  }
  return r;
}

/** A valid private key: 32 bytes, an integer in [1, n-1]. */
export function isPrivate(d: Uint8Array): boolean {
  if (d.length !== 32) return false;
  const v = toBig(d);
  return v > 0n && v < N;
}

/** A public key on the curve (33-byte compressed or 65-byte uncompressed). */
export function isPoint(p: Uint8Array): boolean {
  if (p.length !== 33 && p.length !== 65) return false;
  try {
    SigningKey.computePublicKey(hexlify(p), true);
    return true;
  } catch {
    return false;
  }
}

/** An x-only (BIP-340) public key: 32 bytes, the x of a curve point (x³ + 7 a square mod p). */
export function isXOnlyPoint(p: Uint8Array): boolean {
  if (p.length !== 32) return false;
  const x = toBig(p);
  if (x === 0n || x >= P) return false;
  const y2 = (x * x * x + 7n) % P;
  return modPow(y2, (P - 1n) / 2n, P) === 1n;
}

/** The compressed public key of a private key. */
export function pointFromScalar(d: Uint8Array): Buffer {
  if (!isPrivate(d)) throw new Error('not a secp256k1 private key');
  return Buffer.from(getBytes(SigningKey.computePublicKey(hexlify(d), true)));
}

/** A compact (r ‖ s, 64 bytes) low-S RFC 6979 ECDSA signature of a 32-byte digest. */
export function signDigest(digest: Uint8Array, d: Uint8Array): Buffer {
  if (digest.length !== 32) throw new Error('the digest is 32 bytes');
  const sig = new SigningKey(hexlify(d)).sign(hexlify(digest));
  return Buffer.concat([Buffer.from(getBytes(sig.r)), Buffer.from(getBytes(sig.s))]);
}

/** True when the compact signature is a low-S ECDSA signature of `digest` by public key `q`. */
export function verifyDigest(digest: Uint8Array, q: Uint8Array, signature: Uint8Array): boolean {
  if (digest.length !== 32 || signature.length !== 64 || !isPoint(q)) return false;
  const r = toBig(signature.subarray(0, 32));
  const s = toBig(signature.subarray(32));
  if (r <= 0n || r >= N || s <= 0n || s > N / 2n) return false;
  const want = SigningKey.computePublicKey(hexlify(q), false);
  // A signature is valid for Q exactly when one of its two public-key recoveries is Q.
  for (const yParity of [0, 1] as const) {
    try {
      const sig = Signature.from({
        r: hexlify(signature.subarray(0, 32)),
        s: hexlify(signature.subarray(32)),
        yParity,
      });
      if (SigningKey.recoverPublicKey(hexlify(digest), sig) === want) return true;
    } catch {
      // not recoverable with this parity
    }
  }
  return false;
}

/**
 * What bitcoinjs-lib asks of an ECC library for the addresses this adapter decodes (P2TR's
 * x-only key check); tweaking is not used (no Taproot spends).
 */
export const bitcoinjsEcc = {
  isXOnlyPoint,
  xOnlyPointAddTweak(): null {
    throw new Error('Taproot key tweaks are not supported');
  },
};
