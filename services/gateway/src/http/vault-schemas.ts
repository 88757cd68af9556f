// The HTTP shapes of vaults and secrets (vault-routes.ts).
import { z } from 'zod/v4';
import type { Vault } from '@custos/proto/custos/vault_crypto/v1/messages';
import type { SecretMetadata } from '@custos/proto/custos/vault_crypto/v1/secrets';
import { bodyOf, dateTime, idParam, isoDateTime, jsonObject } from './schemas.js';

const SECRET_TYPES = [
  'password',
  'api_key',
  'private_key',
  'certificate',
  'file',
  'note',
  'ssh_key',
  'env_bundle',
] as const;
/** Secret types of spec §2.1. */
export const secretType = z.enum(SECRET_TYPES);
const PATH_RULE =
  'may hold letters, digits, "-", "_" and "/" between non-empty segments, with no leading or trailing "/"';
const secretPath = z
  .string()
  .max(512, 'must be at most 512 characters')
  .regex(/^[A-Za-z0-9_-]+(\/[A-Za-z0-9_-]+)*$/, PATH_RULE)
  .describe('The secret path, e.g. `prod/db/password`');
const VERSION = /^[1-9][0-9]{0,8}$/;

/** The HTTP shape of a vault (spec §2.2, the reference's VaultResponse). */
export const VaultResponse = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  created_by: z.string(),
  created_by_type: z.enum(['user', 'agent']),
  created_at: dateTime,
});

/** The HTTP shape of a secret version's metadata (spec §2.1); never a value. */
export const SecretResponse = z.object({
  id: z.string().describe("The version's id (what `POST /v1/secrets/{secret_id}/share` takes)"),
  path: z.string(),
  type: secretType,
  version: z.number().int(),
  metadata: jsonObject,
  created_at: dateTime,
  expires_at: dateTime.nullable(),
  max_access_count: z.number().int().nullable().describe('null means unlimited'),
  access_count: z.number().int(),
  is_disabled: z.boolean(),
  created_by: z.string(),
});

/** A secret version with its value (reads). */
export const SecretValueResponse = SecretResponse.extend({
  value: z.string(),
  value_encoding: z.enum(['utf8', 'base64']).describe('How `value` is written'),
});

/** `GET …/env-vars/resolve`. */
export const EnvResponse = z.object({
  vars: z.record(z.string(), z.string()),
  sources: z.record(z.string(), z.enum(['shared', 'vault', 'branch_override'])),
  environment: z.string(),
  git_branch: z.string().nullable(),
  resolved_at: dateTime,
});

/** `PUT …/secrets/{path}`; `secret_type` is the reference CLI's name for `type`. */
export const PutSecretBody = bodyOf({
  type: secretType.nullish().describe('Default `note`'),
  secret_type: secretType.nullish().describe('Alias of `type`, as the reference CLI sends it'),
  value: z.string().describe('The value; may contain NUL (it is encrypted, never stored as text)'),
  value_encoding: z.enum(['utf8', 'base64']).nullish().describe('How `value` is written; default `utf8`'),
  metadata: jsonObject.nullish(),
  expires_at: isoDateTime.nullish().describe('After this the version reads as 410'),
  max_access_count: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).nullish(),
  rotation_policy: jsonObject.nullish(),
})
  .superRefine((b, ctx) => {
    if (b.type && b.secret_type && b.type !== b.secret_type) {
      ctx.addIssue({ code: 'custom', path: ['secret_type'], message: 'must equal type when both are given' });
    }
    if (b.value_encoding === 'base64' && (!/^[A-Za-z0-9+/]*={0,2}$/.test(b.value) || b.value.length % 4)) {
      ctx.addIssue({ code: 'custom', path: ['value'], message: 'value is not valid base64' });
    }
  })
  .transform(({ secret_type, ...b }) => ({ ...b, type: b.type ?? secret_type ?? undefined }));

/** `POST …/secret-rotate/{path}` (DECISIONS.md "Server-side rotation"). */
export const RotateSecretBody = bodyOf({
  length: z.number().int().min(8).max(4096).nullish().describe('Default 32'),
  charset: z.enum(['hex', 'base64', 'alphanumeric', 'ascii']).nullish().describe('Default `alphanumeric`'),
  type: secretType.nullish().describe("Default: the previous version's type"),
});

/** `…/vaults/{vault_id}`. */
export const vaultParams = z.object({ vault_id: idParam });
/** `…/vaults/{vault_id}/secrets/{path}` and the other routes of one path. */
export const secretParams = z.object({ vault_id: idParam, path: secretPath });
/** `…/{path}/{version}`: the version is the last segment. */
export const versionParams = z.object({ vault_id: idParam, rest: z.string() }).superRefine((p, ctx) => {
  const { path, version } = splitVersion(p.rest);
  if (!VERSION.test(version)) {
    ctx.addIssue({
      code: 'custom',
      path: ['version'],
      message: 'must be a positive integer after the secret path',
    });
  } else if (!secretPath.safeParse(path).success) {
    ctx.addIssue({ code: 'custom', path: ['path'], message: PATH_RULE });
  }
});
/** The header of a passkey unlock (spec §5.10), for the document. */
export const PASSKEY = {
  'X-Passkey-Token': 'A passkey unlock, for accounts that require one for secret reads',
};

/** `a/b/3` → path `a/b`, version `3`. */
export function splitVersion(rest: string): { path: string; version: string } {
  const i = rest.lastIndexOf('/');
  return { path: rest.slice(0, Math.max(i, 0)), version: rest.slice(i + 1) };
}

/** A vault as HTTP shows it. */
export function vaultBody(v: Vault): z.infer<typeof VaultResponse> {
  return {
    id: v.id,
    name: v.name,
    description: v.description,
    created_by: v.createdBy,
    created_by_type: v.createdByType as 'user' | 'agent',
    created_at: v.createdAt,
  };
}

/** A secret version's metadata as HTTP shows it; never a value. */
export function secretBody(m: SecretMetadata): z.infer<typeof SecretResponse> {
  return {
    id: m.id,
    path: m.path,
    type: m.type as z.infer<typeof secretType>,
    version: m.version,
    metadata: m.metadata ?? {},
    created_at: m.createdAt,
    expires_at: m.expiresAt || null,
    max_access_count: m.maxAccessCount === undefined ? null : Number(m.maxAccessCount),
    access_count: Number(m.accessCount),
    is_disabled: m.isDisabled,
    created_by: m.createdBy,
  };
}
