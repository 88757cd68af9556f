// secp256k1 ECDSA verification in plain BigInt arithmetic, for the Bitcoin responder.
//
// The responder checks signatures independently of what signs them (signer uses ethers' noble
// build). @bitcoinerlab/secp256k1 2.0.0 would be the usual choice, but it loads @noble/curves 2,
// an ES-module-only package that jest's CommonJS runtime (the workspace preset) cannot load.
// Verification only, on public data: no constant-time concerns.

const P = 0xfffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc2fn;
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const GX = 0x79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798n;
const GY = 0x483ada7726a3c4655da4fbfc0e1108a8fd17b448a68554199c47d08ffb10d4b8n;

type Affine = { x: bigint; y: bigint };
/** Jacobian coordinates (X/Z², Y/Z³); Z = 0 is the point at infinity. */
type Jacobian = { x: bigint; y: bigint; z: bigint };

const INFINITY: Jacobian = { x: 0n, y: 1n, z: 0n };

function mod(a: bigint, m = P): bigint {
  const r = a % m;
  return r >= 0n ? r : r + m;
}

function modPow(b: bigint, e: bigint, m: bigint): bigint {
  let r = 1n;
  b = mod(b, m);
  while (e > 0n) {
    if (e & 1n) r = (r * b) % m;
    b = (b * b) % m;
    e >>= 1n;
  }
  return r;
}

/** a⁻¹ mod m (m prime). */
function inv(a: bigint, m: bigint): bigint {
  return modPow(a, m - 2n, m);
}

function toBig(b: Uint8Array): bigint {
  return b.length === 0 ? 0n : BigInt(`0x${Buffer.from(b).toString('hex')}`);
}

function double(p: Jacobian): Jacobian {
  if (p.z === 0n || p.y === 0n) return INFINITY;
  const ysq = mod(p.y * p.y);
  const s = mod(4n * p.x * ysq);
  const m = mod(3n * p.x * p.x); // a = 0
  const x = mod(m * m - 2n * s);
  const y = mod(m * (s - x) - 8n * ysq * ysq);
  const z = mod(2n * p.y * p.z);
  return { x, y, z };
}

function add(p: Jacobian, q: Jacobian): Jacobian {
  if (p.z === 0n) return q;
  if (q.z === 0n) return p;
  const z1z1 = mod(p.z * p.z);
  const z2z2 = mod(q.z * q.z);
  const u1 = mod(p.x * z2z2);
  const u2 = mod(q.x * z1z1);
  const s1 = mod(p.y * q.z * z2z2);
  const s2 = mod(q.y * p.z * z1z1);
  if (u1 === u2) return s1 === s2 ? double(p) : INFINITY;
  const h = mod(u2 - u1);
  const r = mod(s2 - s1);
  const h2 = mod(h * h);
  const h3 = mod(h * h2);
  const v = mod(u1 * h2);
  const x = mod(r * r - h3 - 2n * v);
  const y = mod(r * (v - x) - s1 * h3);
  const z = mod(h * p.z * q.z);
  return { x, y, z };
}

function multiply(k: bigint, p: Affine): Jacobian {
  let result = INFINITY;
  let addend: Jacobian = { x: p.x, y: p.y, z: 1n };
  while (k > 0n) {
    if (k & 1n) result = add(result, addend);
    addend = double(addend);
    k >>= 1n;
  }
  return result;
}

function toAffine(p: Jacobian): Affine | undefined {
  if (p.z === 0n) return undefined;
  const zi = inv(p.z, P);
  const zi2 = mod(zi * zi);
  return { x: mod(p.x * zi2), y: mod(p.y * zi2 * zi) };
}

/** The curve point of a SEC1 public key (33-byte compressed or 65-byte uncompressed), if it is one. */
export function decodePoint(pub: Uint8Array): Affine | undefined {
  if (pub.length === 33 && (pub[0] === 2 || pub[0] === 3)) {
    const x = toBig(pub.subarray(1));
    if (x >= P) return undefined;
    const y2 = mod(x * x * x + 7n);
    let y = modPow(y2, (P + 1n) / 4n, P);
    if (mod(y * y) !== y2) return undefined;
    if ((y & 1n) !== BigInt(pub[0]! & 1)) y = P - y;
    return { x, y };
  }
  if (pub.length === 65 && pub[0] === 4) {
    const x = toBig(pub.subarray(1, 33));
    const y = toBig(pub.subarray(33));
    if (x >= P || y >= P || mod(y * y) !== mod(x * x * x + 7n)) return undefined;
    return { x, y };
  }
  return undefined;
}

/**
 * True when the compact signature (r ‖ s, 64 bytes) is a valid ECDSA signature of the 32-byte
 * digest by `pub`. `strict`: also require a low S (BIP-62, bitcoind's standardness rule).
 */
export function verifyEcdsa(
  digest: Uint8Array,
  pub: Uint8Array,
  signature: Uint8Array,
  strict = false,
): boolean {
  if (digest.length !== 32 || signature.length !== 64) return false;
  const q = decodePoint(pub);
  if (!q) return false;
  const r = toBig(signature.subarray(0, 32));
  const s = toBig(signature.subarray(32));
  if (r <= 0n || r >= N || s <= 0n || s >= N) return false;
  if (strict && s > N / 2n) return false;
  const e = mod(toBig(digest), N);
  const w = inv(s, N);
  const u1 = mod(e * w, N);
  const u2 = mod(r * w, N);
  const point = toAffine(add(multiply(u1, { x: GX, y: GY }), multiply(u2, q)));
  return point !== undefined && mod(point.x, N) === r;
}
