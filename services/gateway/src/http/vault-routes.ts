import type { Request, RequestHandler } from 'express';
import { Router } from 'express';
import type { Vault } from '@custos/proto/custos/vault_crypto/v1/messages';
import type { SecretMetadata } from '@custos/proto/custos/vault_crypto/v1/secrets';
import { InvalidArgumentError, unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { body, str } from './auth-routes.js';
import { declareUncheckedRoute } from './routes.js';

type Guards = { authenticated: RequestHandler[]; human: RequestHandler[] };

/** The HTTP shape of a vault (spec §2.2, the reference's VaultResponse). */
export function vaultBody(v: Vault | undefined) {
  return {
    id: v?.id,
    name: v?.name,
    description: v?.description ?? '',
    created_by: v?.createdBy,
    created_by_type: v?.createdByType,
    created_at: v?.createdAt,
  };
}

/** The HTTP shape of a secret version's metadata (spec §2.1); never a value. */
export function secretBody(m: SecretMetadata | undefined) {
  return {
    id: m?.id,
    path: m?.path,
    type: m?.type,
    version: m?.version,
    metadata: m?.metadata ?? {},
    created_at: m?.createdAt,
    expires_at: m?.expiresAt || null,
    max_access_count: m?.maxAccessCount === undefined ? null : Number(m.maxAccessCount),
    access_count: Number(m?.accessCount ?? 0),
    is_disabled: m?.isDisabled ?? false,
    created_by: m?.createdBy,
  };
}

/** A nested secret path from Express 5's `*path` parameter (its segments). */
function secretPath(req: Request, param = 'path'): string {
  const raw = (req.params as Record<string, unknown>)[param];
  return Array.isArray(raw) ? raw.join('/') : String(raw ?? '');
}

/** Splits `<path>/<version>` of the version routes; the version must be a positive integer. */
function pathAndVersion(req: Request): { path: string; version: number } {
  const segments = secretPath(req, 'rest').split('/');
  const last = segments.pop() ?? '';
  if (!/^[1-9][0-9]{0,8}$/.test(last)) {
    throw new InvalidArgumentError('version', 'version must be a positive integer after the secret path');
  }
  return { path: segments.join('/'), version: Number(last) };
}

function vaultId(req: Request): string {
  return String(req.params['vault_id']);
}

/** Vaults, secrets and their versions (spec §4.3, DECISIONS "Secrets"); vault-crypto decides access. */
export function vaultRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const vc = peers.vaultCrypto;
  const call = unaryCaller(vc);

  declareUncheckedRoute(router, guards, 'post', '/v1/vaults', 'authenticated', async (req, res) => {
    const b = body(req);
    const r = await call(vc.createVault, { name: str(b, 'name'), description: str(b, 'description') });
    res.status(201).json(vaultBody(r.vault));
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/vaults', 'authenticated', async (_req, res) => {
    const r = await call(vc.listVaults, {});
    res.json({ vaults: r.vaults.map(vaultBody) });
  });

  declareUncheckedRoute(router, guards, 'get', '/v1/vaults/:vault_id', 'authenticated', async (req, res) => {
    const r = await call(vc.getVault, { vaultId: vaultId(req) });
    res.json(vaultBody(r.vault));
  });

  declareUncheckedRoute(
    router,
    guards,
    'delete',
    '/v1/vaults/:vault_id',
    'authenticated',
    async (req, res) => {
      await call(vc.deleteVault, { vaultId: vaultId(req) });
      res.status(204).end();
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'get',
    '/v1/vaults/:vault_id/secrets',
    'authenticated',
    async (req, res) => {
      const prefix = req.query['prefix'];
      if (prefix !== undefined && typeof prefix !== 'string') {
        throw new InvalidArgumentError('prefix', 'prefix must be given once, as a string');
      }
      const r = await call(vc.listSecrets, { vaultId: vaultId(req), prefix: prefix ?? '' });
      res.json({ secrets: r.secrets.map(secretBody) });
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'put',
    '/v1/vaults/:vault_id/secrets/*path',
    'authenticated',
    async (req, res) => {
      const r = await call(vc.putSecret, { vaultId: vaultId(req), path: secretPath(req), fields: body(req) });
      res.status(201).json(secretBody(r.secret));
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'get',
    '/v1/vaults/:vault_id/secrets/*path',
    'authenticated',
    async (req, res) => {
      const r = await call(vc.getSecret, {
        vaultId: vaultId(req),
        path: secretPath(req),
        version: 0,
        passkeyToken: req.header('x-passkey-token') ?? '',
      });
      res.setHeader('Cache-Control', 'no-store');
      res.json({ ...secretBody(r.secret), value: r.value, value_encoding: r.valueEncoding });
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'delete',
    '/v1/vaults/:vault_id/secrets/*path',
    'authenticated',
    async (req, res) => {
      await call(vc.deleteSecret, { vaultId: vaultId(req), path: secretPath(req) });
      res.status(204).end();
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'get',
    '/v1/vaults/:vault_id/secret-versions/*path',
    'authenticated',
    async (req, res) => {
      const r = await call(vc.listSecretVersions, { vaultId: vaultId(req), path: secretPath(req) });
      res.json({ versions: r.versions.map(secretBody) });
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'get',
    '/v1/vaults/:vault_id/secret-version/*rest',
    'authenticated',
    async (req, res) => {
      const { path, version } = pathAndVersion(req);
      const r = await call(vc.getSecret, {
        vaultId: vaultId(req),
        path,
        version,
        passkeyToken: req.header('x-passkey-token') ?? '',
      });
      res.setHeader('Cache-Control', 'no-store');
      res.json({ ...secretBody(r.secret), value: r.value, value_encoding: r.valueEncoding });
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'post',
    '/v1/vaults/:vault_id/secret-version-disable/*rest',
    'authenticated',
    async (req, res) => {
      const { path, version } = pathAndVersion(req);
      const r = await call(vc.disableSecretVersion, { vaultId: vaultId(req), path, version });
      res.json(secretBody(r.secret));
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'post',
    '/v1/vaults/:vault_id/secret-rotate/*path',
    'authenticated',
    async (req, res) => {
      const r = await call(vc.rotateSecret, {
        vaultId: vaultId(req),
        path: secretPath(req),
        fields: body(req),
      });
      res.status(201).json(secretBody(r.secret));
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'get',
    '/v1/vaults/:vault_id/env-vars/resolve',
    'authenticated',
    async (req, res) => {
      const q = (name: string) => {
        const v = req.query[name];
        if (v !== undefined && typeof v !== 'string') {
          throw new InvalidArgumentError(name, `${name} must be given once, as a string`);
        }
        return v ?? '';
      };
      const r = await call(vc.resolveEnvVars, {
        vaultId: vaultId(req),
        environment: q('environment'),
        gitBranch: q('git_branch'),
      });
      res.setHeader('Cache-Control', 'no-store');
      res.json({
        vars: r.vars,
        sources: r.sources,
        environment: r.environment,
        git_branch: r.gitBranch || null,
        resolved_at: r.resolvedAt,
      });
    },
  );

  declareUncheckedRoute(
    router,
    guards,
    'post',
    '/v1/org/encryption-key/rotate',
    'human',
    async (_req, res) => {
      const r = await call(vc.rotateOrgKey, {});
      res.json({ version: r.version });
    },
  );

  return router;
}
