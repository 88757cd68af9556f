import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

// OWASP Password Storage Cheat Sheet: scrypt N=2^15, r=8, p=3 is one of its equivalent minimums
// (32 MiB per hash). identity uses argon2id, but vault-crypto takes no native dependency for it.
const N = 2 ** 15;
const R = 8;
const P = 3;
const KEY_LEN = 32;
const MAXMEM = 64 * 1024 * 1024;

function derive(passphrase: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(passphrase.normalize('NFKC'), salt, KEY_LEN, { N: n, r, p, maxmem: MAXMEM }, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

/** A self-describing hash of a share passphrase: `scrypt$N$r$p$salt$hash` (base64url). */
export async function hashPassphrase(passphrase: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(passphrase, salt, N, R, P);
  return ['scrypt', N, R, P, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** Whether `passphrase` matches a stored hash; a malformed hash matches nothing. Constant-time compare. */
export async function verifyPassphrase(passphrase: string, stored: string): Promise<boolean> {
  const [alg, n, r, p, salt, hash] = stored.split('$');
  if (alg !== 'scrypt' || !n || !r || !p || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const key = await derive(passphrase, Buffer.from(salt, 'base64url'), Number(n), Number(r), Number(p));
  return key.length === expected.length && timingSafeEqual(key, expected);
}
