import { Router } from 'express';
import { z } from 'zod/v4';
import type { Vault } from '@custos/proto/custos/vault_crypto/v1/messages';
import type { SecretMetadata } from '@custos/proto/custos/vault_crypto/v1/secrets';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { type Guards, declareRoute } from './routes.js';
import { bodyOf, dateTime, idParam, jsonObject, queryString } from './schemas.js';

/** A peer's reply message that proto3 marks optional but the peer always sends. */
export function must<T>(m: T | undefined, what: string): T {
  if (m === undefined) throw new Error(`the peer's reply has no ${what}`);
  return m;
}

/** An RFC 3339 date-time in a request (whether it lies in the future is the service's rule). */
export const isoDateTime = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/, 'must be an ISO 8601 date-time')
  .refine((v) => !Number.isNaN(Date.parse(v)), 'must be an ISO 8601 date-time')
  .describe('RFC 3339 date-time');

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
const secretType = z.enum(SECRET_TYPES);
const PATH_RULE =
  'may hold letters, digits, "-", "_" and "/" between non-empty segments, with no leading or trailing "/"';
const secretPath = z
  .string()
  .max(512, 'must be at most 512 characters')
  .regex(/^[A-Za-z0-9_-]+(\/[A-Za-z0-9_-]+)*$/, PATH_RULE)
  .describe('The secret path, e.g. `prod/db/password`');
const VERSION = /^[1-9][0-9]{0,8}$/;

/** The HTTP shape of a vault (spec §2.2, the reference's VaultResponse). */
const VaultResponse = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  created_by: z.string(),
  created_by_type: z.enum(['user', 'agent']),
  created_at: dateTime,
});

/** The HTTP shape of a secret version's metadata (spec §2.1); never a value. */
const SecretResponse = z.object({
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

const SecretValueResponse = SecretResponse.extend({
  value: z.string(),
  value_encoding: z.enum(['utf8', 'base64']).describe('How `value` is written'),
});

const EnvResponse = z.object({
  vars: z.record(z.string(), z.string()),
  sources: z.record(z.string(), z.enum(['shared', 'vault', 'branch_override'])),
  environment: z.string(),
  git_branch: z.string().nullable(),
  resolved_at: dateTime,
});

/** `PUT …/secrets/{path}`; `secret_type` is the reference CLI's name for `type`. */
const PutSecretBody = bodyOf({
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

const RotateSecretBody = bodyOf({
  length: z.number().int().min(8).max(4096).nullish().describe('Default 32'),
  charset: z.enum(['hex', 'base64', 'alphanumeric', 'ascii']).nullish().describe('Default `alphanumeric`'),
  type: secretType.nullish().describe("Default: the previous version's type"),
});

const vaultParams = z.object({ vault_id: idParam });
const secretParams = z.object({ vault_id: idParam, path: secretPath });
/** `…/{path}/{version}`: the version is the last segment. */
const versionParams = z.object({ vault_id: idParam, rest: z.string() }).superRefine((p, ctx) => {
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
const PASSKEY = { 'X-Passkey-Token': 'A passkey unlock, for accounts that require one for secret reads' };

function splitVersion(rest: string): { path: string; version: string } {
  const i = rest.lastIndexOf('/');
  return { path: rest.slice(0, Math.max(i, 0)), version: rest.slice(i + 1) };
}

/** The HTTP shape of a vault. */
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

/** The HTTP shape of a secret version's metadata; never a value. */
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

const tag = 'vaults';

/** Vaults, secrets and their versions (spec §4.3, DECISIONS "Secrets"); vault-crypto decides access. */
export function vaultRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const vc = peers.vaultCrypto;
  const call = unaryCaller(vc);
  const secretValue = async (vaultId: string, path: string, version: number, passkey: string) => {
    const r = await call(vc.getSecret, { vaultId, path, version, passkeyToken: passkey });
    return {
      ...secretBody(must(r.secret, 'secret')),
      value: r.value,
      value_encoding: r.valueEncoding,
    } as z.infer<typeof SecretValueResponse>;
  };

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/vaults',
      access: 'authenticated',
      summary: 'Create a vault (names unique per org after trimming)',
      tag,
      body: bodyOf({
        name: z.string().describe('1 to 255 characters after trimming; not starting with `__`'),
        description: z.string().nullish().describe('At most 1,000 characters'),
      }),
      responses: { 201: { description: 'The vault', schema: VaultResponse } },
    },
    async (_req, res, { body }) => {
      const r = await call(vc.createVault, { name: body.name, description: body.description ?? '' });
      res.status(201).json(vaultBody(must(r.vault, 'vault')));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/vaults',
      access: 'authenticated',
      summary: 'The vaults of the org the caller may see',
      tag,
      responses: {
        200: { description: 'Oldest first', schema: z.object({ vaults: z.array(VaultResponse) }) },
      },
    },
    async (_req, res) => {
      const r = await call(vc.listVaults, {});
      res.json({ vaults: r.vaults.map(vaultBody) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/vaults/:vault_id',
      access: 'authenticated',
      summary: 'One vault',
      tag,
      params: vaultParams,
      responses: { 200: { description: 'The vault', schema: VaultResponse } },
    },
    async (_req, res, { params }) => {
      const r = await call(vc.getVault, { vaultId: params.vault_id });
      res.json(vaultBody(must(r.vault, 'vault')));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'delete',
      path: '/v1/vaults/:vault_id',
      access: 'authenticated',
      summary: 'Delete a vault and every secret in it (its creator or an org admin)',
      tag,
      params: vaultParams,
      responses: { 204: { description: 'Deleted' } },
    },
    async (_req, res, { params }) => {
      await call(vc.deleteVault, { vaultId: params.vault_id });
      res.status(204).end();
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/vaults/:vault_id/secrets',
      access: 'authenticated',
      summary: "The latest version's metadata of every path the caller may read; never a value",
      tag,
      params: vaultParams,
      query: z.object({ prefix: queryString.max(512).optional().describe('Only paths starting with this') }),
      responses: {
        200: { description: 'In path order', schema: z.object({ secrets: z.array(SecretResponse) }) },
      },
    },
    async (_req, res, { params, query }) => {
      const r = await call(vc.listSecrets, { vaultId: params.vault_id, prefix: query.prefix ?? '' });
      res.json({ secrets: r.secrets.map(secretBody) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'put',
      path: '/v1/vaults/:vault_id/secrets/*path',
      access: 'authenticated',
      summary: 'Store a new version of the secret at a path',
      tag,
      params: secretParams,
      body: PutSecretBody,
      nulAllowed: ['value'],
      responses: { 201: { description: "The new version's metadata", schema: SecretResponse } },
    },
    async (_req, res, { params, body }) => {
      const value = Buffer.from(body.value, body.value_encoding === 'base64' ? 'base64' : 'utf8');
      try {
        const r = await call(vc.putSecret, {
          vaultId: params.vault_id,
          path: params.path,
          type: body.type ?? '',
          value,
          metadata: body.metadata ?? undefined,
          expiresAt: body.expires_at ?? undefined,
          maxAccessCount: body.max_access_count ? String(body.max_access_count) : undefined,
          rotationPolicy: body.rotation_policy ?? undefined,
        });
        res.status(201).json(secretBody(must(r.secret, 'secret')));
      } finally {
        value.fill(0);
      }
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/vaults/:vault_id/secrets/*path',
      access: 'authenticated',
      summary: 'Read the latest version of a secret (counted, audited)',
      tag,
      params: secretParams,
      headers: PASSKEY,
      responses: { 200: { description: 'The version and its value', schema: SecretValueResponse } },
    },
    async (req, res, { params }) => {
      const body = await secretValue(params.vault_id, params.path, 0, req.header('x-passkey-token') ?? '');
      res.setHeader('Cache-Control', 'no-store');
      res.json(body);
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'delete',
      path: '/v1/vaults/:vault_id/secrets/*path',
      access: 'authenticated',
      summary: 'Delete every version of a path',
      tag,
      params: secretParams,
      responses: { 204: { description: 'Deleted' } },
    },
    async (_req, res, { params }) => {
      await call(vc.deleteSecret, { vaultId: params.vault_id, path: params.path });
      res.status(204).end();
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/vaults/:vault_id/secret-versions/*path',
      access: 'authenticated',
      summary: "Every version's metadata of a path",
      tag,
      params: secretParams,
      responses: {
        200: { description: 'Newest first', schema: z.object({ versions: z.array(SecretResponse) }) },
      },
    },
    async (_req, res, { params }) => {
      const r = await call(vc.listSecretVersions, { vaultId: params.vault_id, path: params.path });
      res.json({ versions: r.versions.map(secretBody) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/vaults/:vault_id/secret-version/*rest',
      access: 'authenticated',
      summary: 'Read one version of a secret: `…/secret-version/{path}/{version}`',
      tag,
      params: versionParams,
      headers: PASSKEY,
      responses: { 200: { description: 'The version and its value', schema: SecretValueResponse } },
    },
    async (req, res, { params }) => {
      const { path, version } = splitVersion(params.rest);
      const body = await secretValue(
        params.vault_id,
        path,
        Number(version),
        req.header('x-passkey-token') ?? '',
      );
      res.setHeader('Cache-Control', 'no-store');
      res.json(body);
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/vaults/:vault_id/secret-version-disable/*rest',
      access: 'authenticated',
      summary: 'Disable one version: `…/secret-version-disable/{path}/{version}` (it reads as 410)',
      tag,
      params: versionParams,
      responses: { 200: { description: "The version's metadata", schema: SecretResponse } },
    },
    async (_req, res, { params }) => {
      const { path, version } = splitVersion(params.rest);
      const r = await call(vc.disableSecretVersion, {
        vaultId: params.vault_id,
        path,
        version: Number(version),
      });
      res.json(secretBody(must(r.secret, 'secret')));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/vaults/:vault_id/secret-rotate/*path',
      access: 'authenticated',
      summary: 'Store a new version with a value generated by the server',
      tag,
      params: secretParams,
      body: RotateSecretBody,
      responses: { 201: { description: "The new version's metadata", schema: SecretResponse } },
    },
    async (_req, res, { params, body }) => {
      const r = await call(vc.rotateSecret, {
        vaultId: params.vault_id,
        path: params.path,
        length: body.length ?? undefined,
        charset: body.charset ?? undefined,
        type: body.type ?? undefined,
      });
      res.status(201).json(secretBody(must(r.secret, 'secret')));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/vaults/:vault_id/env-vars/resolve',
      access: 'authenticated',
      summary: 'Merge the env bundles of the org shared vault, this vault and a branch override',
      tag,
      params: vaultParams,
      query: z.object({
        environment: queryString.optional().describe("Default: the agent's environment, or `development`"),
        git_branch: queryString.optional(),
      }),
      responses: { 200: { description: 'The variables and where each came from', schema: EnvResponse } },
    },
    async (_req, res, { params, query }) => {
      const r = await call(vc.resolveEnvVars, {
        vaultId: params.vault_id,
        environment: query.environment ?? '',
        gitBranch: query.git_branch ?? '',
      });
      res.setHeader('Cache-Control', 'no-store');
      res.json({
        vars: r.vars,
        sources: r.sources,
        environment: r.environment,
        git_branch: r.gitBranch || null,
        resolved_at: r.resolvedAt,
      } as z.infer<typeof EnvResponse>);
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/org/encryption-key/rotate',
      access: 'human',
      summary: "Start a new version of the org's key-encryption key (owners and admins)",
      tag,
      responses: {
        200: { description: 'The new key version', schema: z.object({ version: z.number().int() }) },
      },
    },
    async (_req, res) => {
      const r = await call(vc.rotateOrgKey, {});
      res.json({ version: r.version });
    },
  );

  return router;
}
