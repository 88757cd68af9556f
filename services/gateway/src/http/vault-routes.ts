import { Router } from 'express';
import { z } from 'zod/v4';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { type Guards, declareRoute } from './routes.js';
import { STEP_UP_PURPOSES, authConfirmOf } from './step-up.js';
import { sendJson } from './respond.js';
import { bodyOf, must, queryString } from './schemas.js';
import {
  EnvResponse,
  PASSKEY,
  PutSecretBody,
  RotateSecretBody,
  SecretResponse,
  SecretValueResponse,
  VaultResponse,
  secretBody,
  secretParams,
  splitVersion,
  vaultBody,
  vaultParams,
  versionParams,
} from './vault-schemas.js';

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
      noHead: true,
      access: 'authenticated',
      summary: 'Read the latest version of a secret (counted, audited)',
      tag,
      params: secretParams,
      headers: PASSKEY,
      responses: { 200: { description: 'The version and its value', schema: SecretValueResponse } },
      // The read agents repeat (tools/bench `agent-read`).
      hot: true,
    },
    async (req, res, { params }) => {
      const body = await secretValue(params.vault_id, params.path, 0, req.header('x-passkey-token') ?? '');
      res.setHeader('Cache-Control', 'no-store');
      sendJson(res, 200, body);
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
      noHead: true,
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
      // Written directly, never 304: the read was counted and audited (sendJson).
      sendJson(res, 200, body);
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
      noHead: true,
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
      stepUp: STEP_UP_PURPOSES.orgKeyRotate,
      responses: {
        200: { description: 'The new key version', schema: z.object({ version: z.number().int() }) },
      },
    },
    async (req, res) => {
      const r = await call(vc.rotateOrgKey, { credential: authConfirmOf(req) });
      res.json({ version: r.version });
    },
  );

  return router;
}
