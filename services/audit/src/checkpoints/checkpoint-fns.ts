import { type KeyObject, createHash, createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import { canonicalJson } from '../chain/chain-fns.js';

/** A checkpoint's signed facts. */
export interface CheckpointFacts {
  orgId: string;
  seq: number;
  headHash: string;
  createdAt: Date;
  keyId: string;
}

/** A stored, signed checkpoint. */
export interface Checkpoint extends CheckpointFacts {
  id: string;
  /** Base64 Ed25519 signature over checkpointMessage. */
  signature: string;
}

/** The prefix of every checkpoint message (domain separation: the key signs nothing else). */
export const CHECKPOINT_CONTEXT = 'custos-audit-checkpoint-v1';

// PKCS#8 DER of an Ed25519 private key is this prefix followed by the 32-byte seed (RFC 8410).
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

/**
 * The bytes a checkpoint signature covers: `custos-audit-checkpoint-v1\n` followed by the canonical
 * JSON (keys sorted, no whitespace) of `{created_at, head_hash, key_id, org_id, seq}`, with
 * `created_at` in ISO 8601 UTC with milliseconds, `org_id` in lower case and `seq` a JSON number.
 */
export function checkpointMessage(f: CheckpointFacts): Buffer {
  const body = canonicalJson({
    created_at: f.createdAt.toISOString(),
    head_hash: f.headHash,
    key_id: f.keyId,
    org_id: f.orgId.toLowerCase(),
    seq: f.seq,
  });
  return Buffer.from(`${CHECKPOINT_CONTEXT}\n${body}`, 'utf8');
}

/** The signing key of checkpoints, its public half and its id. */
export interface CheckpointKey {
  privateKey: KeyObject;
  publicKey: KeyObject;
  /** The raw 32-byte public key, base64. */
  publicKeyBase64: string;
  /** SPKI PEM of the public key. */
  publicKeyPem: string;
  /** First 16 hex digits of SHA-256 of the raw public key. */
  keyId: string;
}

/**
 * Parses AUDIT_CHECKPOINT_SIGNING_KEY: base64 of a 32-byte Ed25519 seed, or a PKCS#8 PEM Ed25519
 * private key. Throws an error that never contains the value.
 */
export function parseCheckpointKey(value: string): CheckpointKey {
  let privateKey: KeyObject;
  const trimmed = value.trim();
  if (trimmed.startsWith('-----BEGIN')) {
    try {
      privateKey = createPrivateKey({ key: trimmed, format: 'pem' });
    } catch {
      throw new Error('AUDIT_CHECKPOINT_SIGNING_KEY is not a readable PKCS#8 PEM private key');
    }
  } else {
    const seed = Buffer.from(trimmed, 'base64');
    if (seed.length !== 32 || seed.toString('base64') !== trimmed.replace(/\s/g, ''))
      throw new Error(
        'AUDIT_CHECKPOINT_SIGNING_KEY must be base64 of a 32-byte Ed25519 seed or a PKCS#8 PEM',
      );
    privateKey = createPrivateKey({
      key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]),
      format: 'der',
      type: 'pkcs8',
    });
  }
  if (privateKey.asymmetricKeyType !== 'ed25519')
    throw new Error('AUDIT_CHECKPOINT_SIGNING_KEY must be an Ed25519 key');
  const publicKey = createPublicKey(privateKey);
  const raw = rawPublicKey(publicKey);
  return {
    privateKey,
    publicKey,
    publicKeyBase64: raw.toString('base64'),
    publicKeyPem: publicKey.export({ format: 'pem', type: 'spki' }).toString(),
    keyId: keyIdOf(raw),
  };
}

/** The raw 32 bytes of an Ed25519 public key (the end of its SPKI DER). */
export function rawPublicKey(k: KeyObject): Buffer {
  const der = k.export({ format: 'der', type: 'spki' });
  return der.subarray(der.length - 32);
}

/** First 16 hex digits of SHA-256 of a raw public key. */
export function keyIdOf(raw: Buffer): string {
  return createHash('sha256').update(raw).digest('hex').slice(0, 16);
}

/** Signs a checkpoint's facts; the signature is base64. */
export function signCheckpoint(
  key: CheckpointKey,
  f: Omit<CheckpointFacts, 'keyId'>,
): CheckpointFacts & {
  signature: string;
} {
  const facts = { ...f, keyId: key.keyId };
  return { ...facts, signature: sign(null, checkpointMessage(facts), key.privateKey).toString('base64') };
}

/** True when `c` is signed by `publicKey` and names its key id. */
export function checkpointSignatureValid(
  publicKey: KeyObject,
  c: CheckpointFacts & { signature: string },
): boolean {
  if (c.keyId !== keyIdOf(rawPublicKey(publicKey))) return false;
  try {
    return verify(null, checkpointMessage(c), publicKey, Buffer.from(c.signature, 'base64'));
  } catch {
    return false;
  }
}
