import { randomInt } from 'node:crypto';
import { InvalidArgumentError } from '@custos/service-kit';
import {
  CHARSETS,
  type Charset,
  type RotateInput,
  type RotateRequest,
  SECRET_TYPES,
  type SecretInput,
  type SecretRequest,
  type SecretType,
} from './secret-types.js';

/** Types an agent whose token has `intents_api_enabled` may not read directly (SPEC §2.1). */
export const KEY_MATERIAL_TYPES: ReadonlySet<string> = new Set(['private_key', 'ssh_key']);

const PATH = /^[A-Za-z0-9_-]+(\/[A-Za-z0-9_-]+)*$/;
const MAX_PATH = 512;
/** The largest value stored, in bytes after decoding. */
export const MAX_VALUE_BYTES = 256 * 1024;
const MAX_METADATA_BYTES = 16 * 1024;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * A secret path as SPEC §2.1 allows it: alphanumeric, `-`, `_`, `/`; no leading or trailing slash,
 * no empty segment; at most 512 characters.
 */
export function secretPath(raw: string, field = 'path'): string {
  if (raw.length === 0) throw new InvalidArgumentError(field, `${field} must not be empty`);
  if (raw.length > MAX_PATH)
    throw new InvalidArgumentError(field, `${field} must be at most ${MAX_PATH} characters`);
  if (!PATH.test(raw)) {
    throw new InvalidArgumentError(
      field,
      `${field} may hold letters, digits, "-", "_" and "/" between non-empty segments, with no leading or trailing "/"`,
    );
  }
  return raw;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Parses an optional RFC 3339 time in the future; absent means none. */
export function futureTime(v: string | undefined, field: string, now: Date): Date | null {
  if (v === undefined) return null;
  if (!/^\d{4}-\d{2}-\d{2}T/.test(v) || Number.isNaN(Date.parse(v))) {
    throw new InvalidArgumentError(field, `${field} must be an ISO 8601 date-time`);
  }
  const t = new Date(v);
  if (t.getTime() <= now.getTime()) throw new InvalidArgumentError(field, `${field} must be in the future`);
  return t;
}

/** A secret type, `fallback` when absent or empty. */
export function secretType(v: string | undefined, fallback: SecretType = 'note'): SecretType {
  if (v === undefined || v === '') return fallback;
  if (!(SECRET_TYPES as readonly string[]).includes(v)) {
    throw new InvalidArgumentError('type', `type must be one of ${SECRET_TYPES.join(', ')}`);
  }
  return v as SecretType;
}

/**
 * Checks a new version, naming the first refused field: the type, the value's size (and, for an
 * env bundle, its JSON), metadata and rotation policy that Postgres can store, a future expiry, a
 * positive read limit. The gateway has checked types and decoded the value already.
 */
export function checkSecretInput(r: SecretRequest, now: Date): SecretInput {
  const type = secretType(r.type);
  if (r.value.length > MAX_VALUE_BYTES) {
    throw new InvalidArgumentError('value', `value must be at most ${MAX_VALUE_BYTES} bytes`);
  }
  if (type === 'env_bundle') parseEnvBundle(r.value);
  const metadata = r.metadata ?? null;
  if (metadata) {
    if (holdsNul(metadata))
      throw new InvalidArgumentError('metadata', 'metadata must not contain NUL characters');
    if (Buffer.byteLength(JSON.stringify(metadata)) > MAX_METADATA_BYTES) {
      throw new InvalidArgumentError(
        'metadata',
        `metadata must be at most ${MAX_METADATA_BYTES} bytes of JSON`,
      );
    }
  }
  const mac = r.maxAccessCount;
  if (mac !== undefined && (!Number.isSafeInteger(mac) || mac < 1)) {
    throw new InvalidArgumentError('max_access_count', 'max_access_count must be a positive integer');
  }
  const rotationPolicy = r.rotationPolicy ?? null;
  if (rotationPolicy && holdsNul(rotationPolicy)) {
    throw new InvalidArgumentError('rotation_policy', 'rotation_policy must not contain NUL characters');
  }
  return {
    type,
    value: r.value,
    metadata,
    expiresAt: futureTime(r.expiresAt, 'expires_at', now),
    maxAccessCount: mac ?? null,
    rotationPolicy,
  };
}

/** The value as the get endpoint returns it: UTF-8 text when valid, base64 otherwise. */
export function encodeValue(value: Buffer): { value: string; encoding: 'utf8' | 'base64' } {
  const text = value.toString('utf8');
  return Buffer.from(text, 'utf8').equals(value)
    ? { value: text, encoding: 'utf8' }
    : { value: value.toString('base64'), encoding: 'base64' };
}

/** The variables of an env bundle: a JSON object of names to string values. */
export function parseEnvBundle(value: Buffer): Record<string, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value.toString('utf8'));
  } catch {
    throw new InvalidArgumentError('value', 'an env_bundle value must be a JSON object of names to strings');
  }
  if (!isObject(parsed)) {
    throw new InvalidArgumentError('value', 'an env_bundle value must be a JSON object of names to strings');
  }
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(parsed)) {
    if (!ENV_NAME.test(k) || typeof v !== 'string') {
      throw new InvalidArgumentError(
        'value',
        `env_bundle variable ${JSON.stringify(k.slice(0, 64))} must be a valid name with a string value`,
      );
    }
    out[k] = v;
  }
  return out;
}

/** Checks a rotation: `length` 8..4096 (default 32), `charset` (default alphanumeric), `type`. */
export function checkRotateInput(r: RotateRequest): RotateInput {
  const length = r.length ?? 32;
  if (!Number.isInteger(length) || length < 8 || length > 4096) {
    throw new InvalidArgumentError('length', 'length must be an integer from 8 to 4096');
  }
  const charset = r.charset ?? 'alphanumeric';
  if (!Object.hasOwn(CHARSETS, charset)) {
    throw new InvalidArgumentError('charset', 'charset must be hex, base64, alphanumeric or ascii');
  }
  const type = r.type === undefined ? undefined : secretType(r.type);
  if (type === 'env_bundle') throw new InvalidArgumentError('type', 'an env_bundle cannot be generated');
  return { length, charset: charset as Charset, type };
}

/** A random value of `length` characters from the charset, drawn without modulo bias. */
export function generateValue(input: Pick<RotateInput, 'length' | 'charset'>): Buffer {
  const alphabet = CHARSETS[input.charset];
  let out = '';
  for (let i = 0; i < input.length; i += 1) out += alphabet[randomInt(alphabet.length)];
  return Buffer.from(out, 'utf8');
}

/** Whether a JSON value holds U+0000 in a key or string anywhere (Postgres jsonb cannot store it). */
export function holdsNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  if (Array.isArray(value)) return value.some(holdsNul);
  if (value && typeof value === 'object') {
    return Object.entries(value).some(([k, v]) => k.includes('\u0000') || holdsNul(v));
  }
  return false;
}
