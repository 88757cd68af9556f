import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/** AES-256-GCM with a random 96-bit IV and a 128-bit tag, as ARCHITECTURE §2 "Crypto" says. */
const ALG = 'aes-256-gcm';
export const KEY_BYTES = 32;
export const IV_BYTES = 12;
const TAG_BYTES = 16;

/** What one AES-256-GCM encryption stores. */
export interface Sealed {
  ciphertext: Buffer;
  iv: Buffer;
  tag: Buffer;
}

/** Thrown when a ciphertext does not decrypt: wrong key, wrong associated data, or tampered bytes. */
export class DecryptionError extends Error {
  constructor() {
    super('ciphertext could not be decrypted');
    this.name = 'DecryptionError';
  }
}

/** Encrypts `plaintext` under `key`, binding `aad`. */
export function seal(key: Buffer, plaintext: Buffer, aad: Buffer): Sealed {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv(ALG, key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad);
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return { ciphertext, iv, tag: cipher.getAuthTag() };
}

/** Decrypts what `seal` produced with the same key and `aad`; anything else throws DecryptionError. */
export function open(key: Buffer, sealed: Sealed, aad: Buffer): Buffer {
  if (sealed.iv.length !== IV_BYTES || sealed.tag.length !== TAG_BYTES) throw new DecryptionError();
  try {
    const decipher = createDecipheriv(ALG, key, sealed.iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(aad);
    decipher.setAuthTag(sealed.tag);
    return Buffer.concat([decipher.update(sealed.ciphertext), decipher.final()]);
  } catch {
    throw new DecryptionError();
  }
}

/** Where a secret version lives: the associated data binds its ciphertext to exactly this place. */
export interface VersionAddress {
  orgId: string;
  vaultId: string;
  path: string;
  version: number;
}

/** Associated data of a secret value: vault id, path and version (a moved ciphertext fails). */
export function valueAad(a: VersionAddress): Buffer {
  return Buffer.from(JSON.stringify(['custos.secret.v1', a.vaultId, a.path, a.version]));
}

/** Associated data of a wrapped data key: org, vault, path and version, and the KEK version. */
export function dataKeyAad(a: VersionAddress, kekVersion: number): Buffer {
  return Buffer.from(JSON.stringify(['custos.dek.v1', a.orgId, a.vaultId, a.path, a.version, kekVersion]));
}

/** A data key wrapped by an org KEK: IV, tag and ciphertext in one buffer (12 + 16 + 32 bytes). */
export function wrapDataKey(kek: Buffer, dataKey: Buffer, aad: Buffer): Buffer {
  const s = seal(kek, dataKey, aad);
  return Buffer.concat([s.iv, s.tag, s.ciphertext]);
}

/** The data key inside `wrapped`; DecryptionError when the KEK or the address is not the one used. */
export function unwrapDataKey(kek: Buffer, wrapped: Buffer, aad: Buffer): Buffer {
  if (wrapped.length !== IV_BYTES + TAG_BYTES + KEY_BYTES) throw new DecryptionError();
  return open(
    kek,
    {
      iv: wrapped.subarray(0, IV_BYTES),
      tag: wrapped.subarray(IV_BYTES, IV_BYTES + TAG_BYTES),
      ciphertext: wrapped.subarray(IV_BYTES + TAG_BYTES),
    },
    aad,
  );
}

/** A fresh random 256-bit key. */
export function newKey(): Buffer {
  return randomBytes(KEY_BYTES);
}

/** A secret version's value sealed under its own data key, and that key wrapped by the org KEK. */
export interface SealedVersion {
  ciphertext: Buffer;
  iv: Buffer;
  tag: Buffer;
  wrappedDataKey: Buffer;
  kekVersion: number;
}

/**
 * Envelope-encrypts one secret version: a fresh data key seals `value` bound to `at`, the KEK
 * wraps the data key bound to `at` and its own version, and the data key is zeroed before this
 * returns (the KEK stays the caller's).
 */
export function sealVersion(
  kek: { version: number; key: Buffer },
  at: VersionAddress,
  value: Buffer,
): SealedVersion {
  const dataKey = newKey();
  try {
    const sealed = seal(dataKey, value, valueAad(at));
    return {
      ciphertext: sealed.ciphertext,
      iv: sealed.iv,
      tag: sealed.tag,
      wrappedDataKey: wrapDataKey(kek.key, dataKey, dataKeyAad(at, kek.version)),
      kekVersion: kek.version,
    };
  } finally {
    dataKey.fill(0);
  }
}
