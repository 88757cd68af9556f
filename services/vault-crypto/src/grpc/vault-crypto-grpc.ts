import { type IdentityKeys, currentCaller } from '@custos/auth';
import type { Vault } from '@custos/proto/custos/vault_crypto/v1/messages';
import type { SecretMetadata } from '@custos/proto/custos/vault_crypto/v1/secrets';
import type { VaultCryptoServiceServer } from '@custos/proto/custos/vault_crypto/v1/service';
import type { AsyncService, RpcAccess } from '@custos/service-kit';
import { checkKmsHealth } from '../kms/kms-fns.js';
import type { KmsProvider } from '../kms/kms-types.js';
import type { EnvService } from '../secrets/env-service.js';
import { encodeValue } from '../secrets/secret-fns.js';
import type { SecretService } from '../secrets/secret-service.js';
import type { SecretRow } from '../secrets/secret-store.js';
import { shareRpcs } from './share-grpc.js';
import type { ShareService } from '../shares/share-service.js';
import type { VaultService } from '../vaults/vault-service.js';
import type { VaultRow } from '../vaults/vault-store.js';

function vaultMessage(v: VaultRow): Vault {
  return {
    id: v.id,
    name: v.name,
    description: v.description,
    createdBy: v.createdBy,
    createdByType: v.createdByType,
    createdAt: v.createdAt.toISOString(),
  };
}

/** A version's metadata; the ciphertext and keys never leave through here. */
function secretMessage(r: SecretRow): SecretMetadata {
  return {
    id: r.id,
    path: r.path,
    type: r.type,
    version: r.version,
    metadata: (r.metadata as Record<string, unknown> | null) ?? undefined,
    createdAt: r.createdAt.toISOString(),
    expiresAt: r.expiresAt?.toISOString() ?? '',
    ...(r.maxAccessCount !== null ? { maxAccessCount: String(r.maxAccessCount) } : {}),
    accessCount: String(r.accessCount),
    isDisabled: r.isDisabled,
    createdBy: r.createdBy,
  };
}

/**
 * Who may call VaultCryptoService: the gateway, for users' requests and the KMS health it reports;
 * identity, for the secret of an e-mailed share link only (and not the gateway: no HTTP request
 * may mint one). (Signer's key-unwrap RPC, when it lands, names `signer` alone.)
 */
export const vaultCryptoAccess: RpcAccess<VaultCryptoServiceServer> = {
  default: ['gateway'],
  methods: { getKmsHealth: ['gateway'], issueShareMailLink: ['identity'] },
};

/** gRPC adapter of VaultCryptoService: verify the caller, decode, call the rules, encode. */
export function vaultCryptoGrpc(deps: {
  kms: KmsProvider;
  keys: IdentityKeys;
  vaults: VaultService;
  secrets: SecretService;
  env: EnvService;
  shares: ShareService;
}): AsyncService<VaultCryptoServiceServer> {
  const caller = () => currentCaller(deps.keys);
  return {
    ...shareRpcs(deps),
    async getKmsHealth() {
      const h = await checkKmsHealth(deps.kms);
      return { provider: deps.kms.name, healthy: h.healthy, detail: h.detail, latencyMs: h.latencyMs };
    },
    async createVault(req) {
      return { vault: vaultMessage(await deps.vaults.create(await caller(), req)) };
    },
    async listVaults() {
      return { vaults: (await deps.vaults.list(await caller())).map(vaultMessage) };
    },
    async getVault(req) {
      return { vault: vaultMessage(await deps.vaults.get(await caller(), req.vaultId)) };
    },
    async deleteVault(req) {
      await deps.vaults.delete(await caller(), req.vaultId);
      return {};
    },
    async describeVault(req) {
      const v = await deps.vaults.describe(await caller(), req.vaultId);
      return {
        vaultId: v.id,
        orgId: v.orgId,
        createdBy: v.createdBy,
        createdByType: v.createdByType,
        isSystem: v.isSystem,
      };
    },
    async putSecret(req) {
      try {
        const row = await deps.secrets.put(await caller(), req.vaultId, req.path, {
          type: req.type,
          value: req.value,
          metadata: req.metadata,
          expiresAt: req.expiresAt,
          maxAccessCount: req.maxAccessCount === undefined ? undefined : Number(req.maxAccessCount),
          rotationPolicy: req.rotationPolicy,
        });
        return { secret: secretMessage(row) };
      } finally {
        req.value.fill(0);
      }
    },
    async getSecret(req) {
      const r = await deps.secrets.read(await caller(), req.vaultId, req.path, req.version, req.passkeyToken);
      try {
        const out = encodeValue(r.value);
        return { secret: secretMessage(r.row), value: out.value, valueEncoding: out.encoding };
      } finally {
        r.value.fill(0);
      }
    },
    async listSecrets(req) {
      const rows = await deps.secrets.list(await caller(), req.vaultId, req.prefix);
      return { secrets: rows.map(secretMessage) };
    },
    async deleteSecret(req) {
      await deps.secrets.delete(await caller(), req.vaultId, req.path);
      return {};
    },
    async listSecretVersions(req) {
      const rows = await deps.secrets.versions(await caller(), req.vaultId, req.path);
      return { versions: rows.map(secretMessage) };
    },
    async disableSecretVersion(req) {
      const row = await deps.secrets.disable(await caller(), req.vaultId, req.path, req.version);
      return { secret: secretMessage(row) };
    },
    async rotateSecret(req) {
      const row = await deps.secrets.rotate(await caller(), req.vaultId, req.path, {
        length: req.length,
        charset: req.charset,
        type: req.type,
      });
      return { secret: secretMessage(row) };
    },
    async resolveEnvVars(req) {
      const r = await deps.env.resolve(await caller(), req.vaultId, req.environment, req.gitBranch);
      return {
        vars: r.vars,
        sources: r.sources,
        environment: r.environment,
        gitBranch: r.gitBranch,
        resolvedAt: r.resolvedAt.toISOString(),
      };
    },
    async rotateOrgKey(req) {
      return { version: await deps.vaults.rotateOrgKey(await caller(), req.credential) };
    },
  };
}
