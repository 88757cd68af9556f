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

/** A new version as a caller asks for it (unchecked; see `checkSecretInput`). */
export interface SecretRequest {
  /** Empty: `note`. */
  type: string;
  value: Buffer;
  metadata?: Record<string, unknown> | undefined;
  /** RFC 3339; absent: never. */
  expiresAt?: string | undefined;
  /** Absent: unlimited. */
  maxAccessCount?: number | undefined;
  rotationPolicy?: Record<string, unknown> | undefined;
}

/** A checked new version (SPEC §4.3). */
export interface SecretInput {
  type: SecretType;
  value: Buffer;
  metadata: Record<string, unknown> | null;
  expiresAt: Date | null;
  maxAccessCount: number | null;
  rotationPolicy: Record<string, unknown> | null;
}

/** The alphabets a server-side rotation draws from. */
export const CHARSETS = {
  hex: '0123456789abcdef',
  alphanumeric: 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789',
  base64: 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/',
  ascii: Array.from({ length: 94 }, (_, i) => String.fromCharCode(33 + i)).join(''),
} as const;
/** A rotation alphabet's name. */
export type Charset = keyof typeof CHARSETS;

/** A server-side rotation as a caller asks for it (unchecked; see `checkRotateInput`). */
export interface RotateRequest {
  /** Absent: 32. */
  length?: number | undefined;
  /** Absent: `alphanumeric`. */
  charset?: string | undefined;
  /** Absent: the previous version's type, or `password`. */
  type?: string | undefined;
}

/** A checked rotation (DECISIONS.md "Server-side rotation"). */
export interface RotateInput {
  length: number;
  charset: Charset;
  type: SecretType | undefined;
}
