import {
  type KeyObject,
  createCipheriv,
  createDecipheriv,
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  randomUUID,
  sign,
} from 'node:crypto';

/** A public Ed25519 JWK as published in the JWKS. */
export interface PublicJwk {
  kty: 'OKP';
  crv: 'Ed25519';
  x: string;
  kid: string;
  alg: 'EdDSA';
  use: 'sig';
}

/** A freshly generated signing key: its id, public JWK and PKCS#8 private key bytes. */
export interface GeneratedSigningKey {
  kid: string;
  publicJwk: PublicJwk;
  privateKeyDer: Buffer;
}

/** The public JWK of an Ed25519 key, with its RFC 7638 thumbprint as `kid`. */
export function publicJwkOf(key: KeyObject): PublicJwk {
  const jwk = createPublicKey(key).export({ format: 'jwk' }) as { x: string; crv?: string };
  if (jwk.crv !== 'Ed25519') throw new Error('not an Ed25519 key');
  // RFC 7638: members in lexicographic order, no whitespace.
  const thumbprint = createHash('sha256')
    .update(JSON.stringify({ crv: 'Ed25519', kty: 'OKP', x: jwk.x }))
    .digest('base64url');
  return { kty: 'OKP', crv: 'Ed25519', x: jwk.x, kid: thumbprint, alg: 'EdDSA', use: 'sig' };
}

/** Generates an Ed25519 key whose `kid` is its RFC 7638 JWK thumbprint. */
export function generateSigningKey(): GeneratedSigningKey {
  const { privateKey } = generateKeyPairSync('ed25519');
  const publicJwk = publicJwkOf(privateKey);
  return {
    kid: publicJwk.kid,
    publicJwk,
    privateKeyDer: privateKey.export({ format: 'der', type: 'pkcs8' }),
  };
}

/**
 * The key of a stored row, if the row is genuine: its sealed private half opens under the KEK with
 * the row's kid as AAD, the kid is the thumbprint of the public key derived from that private key,
 * and the stored public JWK is that key. Anything else (a row written by someone without the KEK,
 * or altered) is undefined, and must be neither published nor used.
 */
export function checkedSigningKey(
  row: { kid: string; publicJwk: unknown; privateKeyEnc: Buffer },
  kek: Buffer,
): { publicJwk: PublicJwk; privateKey: KeyObject } | undefined {
  let privateKey: KeyObject;
  try {
    privateKey = openPrivateKey(row.privateKeyEnc, kek, row.kid);
  } catch {
    return undefined;
  }
  let derived: PublicJwk;
  try {
    derived = publicJwkOf(privateKey);
  } catch {
    return undefined;
  }
  const stored = row.publicJwk as Partial<PublicJwk> | null;
  if (derived.kid !== row.kid || stored?.x !== derived.x || stored?.kid !== derived.kid) return undefined;
  return { publicJwk: derived, privateKey };
}

/** Encrypts a private key under the key-encryption key, bound to its kid: `iv(12) | tag(16) | ct`. */
export function sealPrivateKey(privateKeyDer: Buffer, kek: Buffer, kid: string): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', kek, iv);
  cipher.setAAD(Buffer.from(`custos-signing-key:${kid}`));
  const ct = Buffer.concat([cipher.update(privateKeyDer), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), ct]);
}

/** Decrypts a sealed private key; throws when the KEK or kid is wrong or the bytes were altered. */
export function openPrivateKey(sealed: Buffer, kek: Buffer, kid: string): KeyObject {
  const decipher = createDecipheriv('aes-256-gcm', kek, sealed.subarray(0, 12));
  decipher.setAAD(Buffer.from(`custos-signing-key:${kid}`));
  decipher.setAuthTag(sealed.subarray(12, 28));
  const der = Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]);
  try {
    return createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
  } finally {
    der.fill(0);
  }
}

/** The public KeyObject of a published JWK. */
export function publicKeyOf(jwk: PublicJwk): KeyObject {
  return createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x }, format: 'jwk' });
}

/** Signs a JWT with EdDSA (RFC 8037): header `{alg: EdDSA, typ: JWT, kid}`. */
export function signJwt(claims: Record<string, unknown>, key: KeyObject, kid: string): string {
  const header = Buffer.from(JSON.stringify({ alg: 'EdDSA', typ: 'JWT', kid })).toString('base64url');
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  const signature = sign(null, Buffer.from(`${header}.${payload}`), key).toString('base64url');
  return `${header}.${payload}.${signature}`;
}

/** A new token id (`jti`). */
export function newTokenId(): string {
  return randomUUID();
}
