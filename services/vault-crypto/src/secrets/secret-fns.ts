import { randomInt } from 'node:crypto';
import { InvalidArgumentError } from '@custos/service-kit';

/** Secret types of SPEC §2.1. */
export const SECRET_TYPES = [
  'password',
  'api_key',
  'private_key',
  'certificate',
  'file',
  'note',
  'ssh_key',
  'env_bundle',
] as const;
export type SecretType = (typeof SECRET_TYPES)[number];

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

/** A validated PUT body (SPEC §4.3). */
export interface SecretInput {
  type: SecretType;
  value: Buffer;
  metadata: Record<string, unknown> | null;
  expiresAt: Date | null;
  maxAccessCount: number | null;
  rotationPolicy: Record<string, unknown> | null;
}

const PUT_FIELDS = new Set([
  'type',
  'value',
  'value_encoding',
  'metadata',
  'expires_at',
  'max_access_count',
  'rotation_policy',
]);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Parses an optional ISO 8601 time in the future; null clears. */
export function futureTime(v: unknown, field: string, now: Date): Date | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || !/^\d{4}-\d{2}-\d{2}T/.test(v) || Number.isNaN(Date.parse(v))) {
    throw new InvalidArgumentError(field, `${field} must be an ISO 8601 date-time`);
  }
  const t = new Date(v);
  if (t.getTime() <= now.getTime()) throw new InvalidArgumentError(field, `${field} must be in the future`);
  return t;
}

/** The secret type of a body, `note` when absent. */
export function secretType(v: unknown, fallback: SecretType = 'note'): SecretType {
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'string' || !(SECRET_TYPES as readonly string[]).includes(v)) {
    throw new InvalidArgumentError('type', `type must be one of ${SECRET_TYPES.join(', ')}`);
  }
  return v as SecretType;
}

/** Validates a PUT body field by field, naming the first bad one. */
export function parseSecretInput(fields: Record<string, unknown>, now: Date): SecretInput {
  for (const k of Object.keys(fields)) {
    if (!PUT_FIELDS.has(k)) throw new InvalidArgumentError(k, `${k} is not a field of a secret`);
  }
  const type = secretType(fields['type']);
  const raw = fields['value'];
  if (typeof raw !== 'string')
    throw new InvalidArgumentError('value', 'value is required and must be a string');
  const encoding = fields['value_encoding'] ?? 'utf8';
  let value: Buffer;
  if (encoding === 'utf8') value = Buffer.from(raw, 'utf8');
  else if (encoding === 'base64') {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(raw) || raw.length % 4 !== 0) {
      throw new InvalidArgumentError('value', 'value is not valid base64');
    }
    value = Buffer.from(raw, 'base64');
  } else throw new InvalidArgumentError('value_encoding', 'value_encoding must be utf8 or base64');
  if (value.length > MAX_VALUE_BYTES) {
    throw new InvalidArgumentError('value', `value must be at most ${MAX_VALUE_BYTES} bytes`);
  }
  if (type === 'env_bundle') parseEnvBundle(value);

  const metadata = fields['metadata'];
  if (metadata !== undefined && metadata !== null) {
    if (!isObject(metadata)) throw new InvalidArgumentError('metadata', 'metadata must be a JSON object');
    if (holdsNul(metadata))
      throw new InvalidArgumentError('metadata', 'metadata must not contain NUL characters');
    if (Buffer.byteLength(JSON.stringify(metadata)) > MAX_METADATA_BYTES) {
      throw new InvalidArgumentError(
        'metadata',
        `metadata must be at most ${MAX_METADATA_BYTES} bytes of JSON`,
      );
    }
  }
  const mac = fields['max_access_count'];
  if (
    mac !== undefined &&
    mac !== null &&
    (typeof mac !== 'number' || !Number.isSafeInteger(mac) || mac < 1)
  ) {
    throw new InvalidArgumentError('max_access_count', 'max_access_count must be a positive integer');
  }
  const rotation = fields['rotation_policy'];
  if (rotation !== undefined && rotation !== null && !isObject(rotation)) {
    throw new InvalidArgumentError('rotation_policy', 'rotation_policy must be a JSON object');
  }
  if (rotation && holdsNul(rotation)) {
    throw new InvalidArgumentError('rotation_policy', 'rotation_policy must not contain NUL characters');
  }
  return {
    type,
    value,
    metadata: isObject(metadata) ? metadata : null,
    expiresAt: futureTime(fields['expires_at'], 'expires_at', now),
    maxAccessCount: typeof mac === 'number' ? mac : null,
    rotationPolicy: isObject(rotation) ? rotation : null,
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

const CHARSETS = {
  hex: '0123456789abcdef',
  alphanumeric: 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789',
  base64: 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/',
  ascii: Array.from({ length: 94 }, (_, i) => String.fromCharCode(33 + i)).join(''),
} as const;

/** A validated rotate body (DECISIONS.md "Server-side rotation"). */
export interface RotateInput {
  length: number;
  charset: keyof typeof CHARSETS;
  type: SecretType | undefined;
}

/** Validates a rotate body: `length` 8..4096 (default 32), `charset` (default alphanumeric), `type`. */
export function parseRotateInput(fields: Record<string, unknown>): RotateInput {
  for (const k of Object.keys(fields)) {
    if (!['length', 'charset', 'type'].includes(k))
      throw new InvalidArgumentError(k, `${k} is not a rotate field`);
  }
  const length = fields['length'] ?? 32;
  if (typeof length !== 'number' || !Number.isInteger(length) || length < 8 || length > 4096) {
    throw new InvalidArgumentError('length', 'length must be an integer from 8 to 4096');
  }
  const charset = fields['charset'] ?? 'alphanumeric';
  if (typeof charset !== 'string' || !Object.hasOwn(CHARSETS, charset)) {
    throw new InvalidArgumentError('charset', 'charset must be hex, base64, alphanumeric or ascii');
  }
  const type = fields['type'] === undefined ? undefined : secretType(fields['type']);
  if (type === 'env_bundle') throw new InvalidArgumentError('type', 'an env_bundle cannot be generated');
  return { length, charset: charset as keyof typeof CHARSETS, type };
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
