import { InvalidArgumentError, isUuid } from '@custos/service-kit';
import type { ChainFamily } from '../chains/chain-types.js';
import type { ChainAdapter } from '../keys/chain-adapter.js';

/** Step-up purpose of exporting an agent's signing key (identity checks the credential). */
export const EXPORT_PURPOSE = 'agent.signing_key.export';
/** Step-up purpose of importing a private key as an agent's signing key. */
export const IMPORT_PURPOSE = 'agent.signing_key.import';

/** The wrap types of a client_tss key's user share (SPEC §2.8). */
export const WRAP_TYPES = ['passkey_prf', 'recovery_code'] as const;
/** One wrap type. */
export type WrapType = (typeof WRAP_TYPES)[number];

/** Size limits of a wrap: what a wrapped 32-byte share with its tag and header needs, and room. */
export const WRAP_LIMITS = {
  ciphertextMin: 16,
  ciphertextMax: 4096,
  nonceMax: 64,
  saltMax: 128,
  algorithmMax: 64,
  credentialIdMax: 1024,
  kdfMax: 32,
  kdfParamsMax: 8,
} as const;

/** One wrap as signer keeps it: the ciphertext and the parameters to unwrap it (never opened). */
export interface Wrap {
  type: WrapType;
  ciphertext: Buffer;
  algorithm: string;
  nonce: Buffer;
  credentialId: string;
  salt: Buffer;
  kdf: string;
  kdfParams: Record<string, number>;
}

/** A stored wrap with its times. */
export interface StoredWrap extends Wrap {
  createdAt: Date;
  updatedAt: Date;
}

/** A key id from a path: a UUID, lower-cased (400 naming `key_id`). */
export function keyIdOf(raw: string): string {
  if (!isUuid(raw)) throw new InvalidArgumentError('key_id', 'must be a UUID');
  return raw.toLowerCase();
}

/**
 * The private key of an import: 0x-prefixed hex of the 32 bytes the family's adapter keeps (an EVM,
 * Bitcoin or Tron secp256k1 scalar; a Solana, XRP or Cardano ed25519 private key / seed), which the
 * adapter must accept (it derives the public key and address). 400 naming `private_key`
 * otherwise; the message never repeats the value.
 */
export function importedKeyOf(family: ChainFamily, adapter: ChainAdapter, raw: string): Buffer {
  if (!/^0x[0-9a-fA-F]{64}$/.test(raw)) {
    throw new InvalidArgumentError('private_key', 'must be 0x-prefixed hex of 32 bytes');
  }
  const bytes = Buffer.from(raw.slice(2), 'hex');
  try {
    adapter.derive(bytes);
  } catch {
    bytes.fill(0);
    throw new InvalidArgumentError(
      'private_key',
      `is not a valid ${adapter.curve} private key for ${family} keys`,
    );
  }
  return bytes;
}

const PRINTABLE = /^[\x21-\x7e]*$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
const KDF = /^[a-z0-9][a-z0-9_-]*$/;
const PARAM = /^[a-z][a-z0-9_]{0,15}$/;

/**
 * Checks one wrap's shape and sizes (never its content: signer cannot open it). `field` prefixes
 * the field names of the 400s, e.g. `wraps[1]`. A passkey_prf wrap names its credential; a
 * recovery_code wrap names its KDF.
 */
export function checkWrap(w: Wrap, field: string): Wrap {
  const bad = (name: string, detail: string) => new InvalidArgumentError(`${field}.${name}`, detail);
  if (!(WRAP_TYPES as readonly string[]).includes(w.type)) {
    throw bad('type', `must be one of ${WRAP_TYPES.join(', ')}`);
  }
  const L = WRAP_LIMITS;
  if (w.ciphertext.length < L.ciphertextMin || w.ciphertext.length > L.ciphertextMax) {
    throw bad('ciphertext', `must be ${L.ciphertextMin} to ${L.ciphertextMax} bytes`);
  }
  if (w.nonce.length > L.nonceMax) throw bad('nonce', `must be at most ${L.nonceMax} bytes`);
  if (w.salt.length > L.saltMax) throw bad('salt', `must be at most ${L.saltMax} bytes`);
  if (w.algorithm.length > L.algorithmMax || !PRINTABLE.test(w.algorithm)) {
    throw bad('algorithm', `must be at most ${L.algorithmMax} printable characters without spaces`);
  }
  if (w.type === 'passkey_prf') {
    if (w.credentialId === '') throw bad('credential_id', 'is required for a passkey_prf wrap');
    if (w.credentialId.length > L.credentialIdMax || !BASE64URL.test(w.credentialId)) {
      throw bad('credential_id', `must be base64url, at most ${L.credentialIdMax} characters`);
    }
  } else if (w.credentialId !== '') {
    throw bad('credential_id', 'is only for a passkey_prf wrap');
  }
  if (w.type === 'recovery_code' && w.kdf === '') throw bad('kdf', 'is required for a recovery_code wrap');
  if (w.kdf !== '' && (w.kdf.length > L.kdfMax || !KDF.test(w.kdf))) {
    throw bad('kdf', `must be a lower-case name (e.g. argon2id), at most ${L.kdfMax} characters`);
  }
  const params = Object.entries(w.kdfParams);
  if (params.length > 0 && w.kdf === '') throw bad('kdf_params', 'needs kdf');
  if (params.length > L.kdfParamsMax) throw bad('kdf_params', `must have at most ${L.kdfParamsMax} entries`);
  for (const [k, v] of params) {
    if (!PARAM.test(k)) throw bad('kdf_params', 'names must be lower-case words of at most 16 characters');
    if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) {
      throw bad('kdf_params', 'values must be integers from 0 to 4294967295');
    }
  }
  return w;
}

/** The wraps of a PUT: one or two, of distinct types, each checked. */
export function checkWraps(wraps: Wrap[]): Wrap[] {
  if (wraps.length === 0) throw new InvalidArgumentError('wraps', 'at least one wrap is required');
  if (wraps.length > WRAP_TYPES.length) {
    throw new InvalidArgumentError('wraps', `at most ${WRAP_TYPES.length} wraps, one per type`);
  }
  wraps.forEach((w, i) => checkWrap(w, `wraps[${i}]`));
  if (new Set(wraps.map((w) => w.type)).size !== wraps.length) {
    throw new InvalidArgumentError('wraps', 'two wraps of the same type');
  }
  return wraps;
}

/** Whether a key's user share can be recovered both ways: a passkey_prf and a recovery_code wrap. */
export function wrapsComplete(types: readonly string[]): boolean {
  return WRAP_TYPES.every((t) => types.includes(t));
}

/** The unwrap parameters as stored (JSON; byte fields as base64). */
export function wrapParams(w: Wrap): Record<string, unknown> {
  return {
    algorithm: w.algorithm,
    nonce: w.nonce.toString('base64'),
    credential_id: w.credentialId,
    salt: w.salt.toString('base64'),
    kdf: w.kdf,
    kdf_params: w.kdfParams,
  };
}

/** A stored wrap from its row. */
export function wrapOfRow(row: {
  type: string;
  ciphertext: Buffer;
  params: unknown;
  createdAt: Date;
  updatedAt: Date;
}): StoredWrap {
  const p = (row.params ?? {}) as Record<string, unknown>;
  const str = (k: string) => (typeof p[k] === 'string' ? (p[k] as string) : '');
  return {
    type: row.type as WrapType,
    ciphertext: Buffer.from(row.ciphertext),
    algorithm: str('algorithm'),
    nonce: Buffer.from(str('nonce'), 'base64'),
    credentialId: str('credential_id'),
    salt: Buffer.from(str('salt'), 'base64'),
    kdf: str('kdf'),
    kdfParams: (p['kdf_params'] as Record<string, number> | undefined) ?? {},
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

/** What an audit record may say of a wrap: its type and sizes, never its bytes. */
export function wrapSummary(w: Wrap): Record<string, unknown> {
  return {
    type: w.type,
    ciphertext_bytes: w.ciphertext.length,
    algorithm: w.algorithm,
    kdf: w.kdf,
    ...(w.credentialId ? { credential_id: w.credentialId } : {}),
  };
}
