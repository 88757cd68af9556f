import { ConflictError, InvalidArgumentError, NotFoundError, isUuid } from '@custos/service-kit';
import type { AuditRecordInput } from '@custos/events';
import { writeVaultCryptoAudit } from '../audit/vault-crypto-audit.js';
import { sealVersion } from '../crypto/envelope-fns.js';
import type { OrgKeyRing } from '../keys/org-key-ring.js';
import { secretPath } from '../secrets/secret-fns.js';
import type { SecretRow, SecretStore } from '../secrets/secret-store.js';
import { SYSTEM_VAULT_NAMES } from '../vaults/vault-fns.js';
import type { VaultStore } from '../vaults/vault-store.js';

/** One key version's private half, as signer hands it over. */
export interface AgentKeyInput {
  orgId: string;
  agentId: string;
  chain: string;
  keyId: string;
  keyVersion: number;
  curve: string;
  privateKey: Buffer;
}

const AGENT_KEYS_VAULT = SYSTEM_VAULT_NAMES[0];

/**
 * Seals agents' private keys into the org's `__agent-keys` system vault, as a `private_key` secret
 * at `agents/<agent>/<chain>/<key id>`, envelope-encrypted like every secret (its own data key,
 * wrapped by the org KEK). It acts for no user: the gRPC edge lets only signer's certificate in.
 * The general secrets API refuses system vaults to everyone, and nothing here ever returns a key.
 */
export class AgentKeyService {
  constructor(
    private readonly deps: {
      vaults: Pick<VaultStore, 'ensureSystemVaults' | 'findByName'>;
      secrets: Pick<SecretStore, 'find' | 'insertNextVersion' | 'byId'>;
      ring: Pick<OrgKeyRing, 'active'>;
      /** Opens a stored version (the secrets service's, with its data-key cache). */
      open: (row: SecretRow) => Promise<Buffer>;
      /** Writes an audit record on its own (fail-closed: it resolves once committed). */
      audit: (r: AuditRecordInput) => Promise<void>;
    },
  ) {}

  /**
   * Opens one stored key version for signer (`sign` or `export`). Only a live version in the org's
   * `__agent-keys` vault whose metadata names `keyId` is opened; anything else is 404 (the same
   * answer for a missing, deleted or foreign id). The key is opened, then the load is audited
   * (`secret.agent_key_loaded`), then the key is returned.
   */
  async load(r: {
    orgId: string;
    secretId: string;
    keyId: string;
    purpose: string;
  }): Promise<{ privateKey: Buffer; curve: string }> {
    for (const [field, v] of [
      ['org_id', r.orgId],
      ['secret_id', r.secretId],
      ['key_id', r.keyId],
    ] as const) {
      if (!isUuid(v)) throw new InvalidArgumentError(field, 'must be a UUID');
    }
    if (r.purpose !== 'sign' && r.purpose !== 'export') {
      throw new InvalidArgumentError('purpose', 'must be sign or export');
    }
    const orgId = r.orgId.toLowerCase();
    const vault = await this.deps.vaults.findByName(orgId, AGENT_KEYS_VAULT);
    const row = vault ? await this.deps.secrets.byId(orgId, r.secretId.toLowerCase()) : undefined;
    const meta = (row?.metadata ?? {}) as Record<string, unknown>;
    if (!vault || !row || row.vaultId !== vault.id || meta.key_id !== r.keyId.toLowerCase()) {
      throw new NotFoundError('agent key', r.keyId);
    }
    // Opened first, recorded second, returned third: a version that cannot be opened leaves no
    // `secret.agent_key_loaded` record, and a load that cannot be recorded returns nothing (zeroed).
    const privateKey = await this.deps.open(row);
    try {
      await this.deps.audit({
        orgId,
        actorType: 'system',
        actorId: null,
        action: 'secret.agent_key_loaded',
        resourceType: 'secret',
        resourceId: row.id,
        metadata: {
          by: 'signer',
          purpose: r.purpose,
          vault_id: vault.id,
          path: row.path,
          agent_id: meta.agent_id ?? null,
          chain: meta.chain ?? null,
          key_version: meta.key_version ?? null,
        },
      });
    } catch (err) {
      privateKey.fill(0);
      throw err;
    }
    return { privateKey, curve: typeof meta.curve === 'string' ? meta.curve : '' };
  }

  /** Stores one key version (once: a key id already stored is refused). */
  async store(k: AgentKeyInput): Promise<{ secretId: string; vaultId: string; path: string }> {
    for (const [field, v] of [
      ['org_id', k.orgId],
      ['agent_id', k.agentId],
      ['key_id', k.keyId],
    ] as const) {
      if (!isUuid(v)) throw new InvalidArgumentError(field, 'must be a UUID');
    }
    if (!/^[a-z0-9-]{1,63}$/.test(k.chain))
      throw new InvalidArgumentError('chain', 'must be a chain key name');
    if (!Number.isInteger(k.keyVersion) || k.keyVersion < 1) {
      throw new InvalidArgumentError('key_version', 'must be a positive integer');
    }
    if (k.privateKey.length === 0 || k.privateKey.length > 256) {
      throw new InvalidArgumentError('private_key', 'must be 1..256 bytes');
    }
    const orgId = k.orgId.toLowerCase();
    await this.deps.vaults.ensureSystemVaults(orgId);
    const vault = await this.deps.vaults.findByName(orgId, AGENT_KEYS_VAULT);
    if (!vault) throw new Error('the __agent-keys vault is missing after it was ensured');
    const path = secretPath(`agents/${k.agentId.toLowerCase()}/${k.chain}/${k.keyId.toLowerCase()}`);
    if (await this.deps.secrets.find(vault.id, path))
      throw new ConflictError('this key id is stored already');
    const kek = await this.deps.ring.active(orgId);
    const at = { orgId, vaultId: vault.id, path };
    try {
      const row = await this.deps.secrets.insertNextVersion(
        at,
        -1,
        (version) => ({
          type: 'private_key',
          ...sealVersion(kek, { ...at, version }, k.privateKey),
          metadata: {
            agent_id: k.agentId,
            chain: k.chain,
            key_id: k.keyId,
            key_version: k.keyVersion,
            curve: k.curve,
          },
          expiresAt: null,
          maxAccessCount: null,
          rotationPolicy: null,
          createdBy: k.agentId,
          createdByType: 'system',
        }),
        (tx, r) =>
          writeVaultCryptoAudit(tx, {
            orgId,
            actorType: 'system',
            actorId: null,
            action: 'secret.agent_key_stored',
            resourceType: 'secret',
            resourceId: r.id,
            metadata: {
              by: 'signer',
              vault_id: vault.id,
              path,
              agent_id: k.agentId,
              chain: k.chain,
              key_version: k.keyVersion,
            },
          }),
      );
      if (row === 'cap') throw new Error('an uncapped insert reported a cap');
      return { secretId: row.id, vaultId: vault.id, path };
    } finally {
      kek.key.fill(0);
    }
  }
}
