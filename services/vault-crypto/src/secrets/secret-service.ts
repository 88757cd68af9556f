import { type Principal, actorOf } from '@custos/auth';
import {
  ExpiringLru,
  GoneError,
  InvalidArgumentError,
  type Logger,
  NotFoundError,
  PermissionDeniedError,
  ResourceLimitExceededError,
  type Transaction,
  isUuid,
} from '@custos/service-kit';
import type { AccessService } from '../access/access-service.js';
import type { VaultCryptoAudit } from '../audit/vault-crypto-audit.js';
import {
  type VersionAddress,
  dataKeyAad,
  open,
  sealVersion,
  unwrapDataKey,
  valueAad,
  wrapDataKey,
} from '../crypto/envelope-fns.js';
import type { OrgKeyRing } from '../keys/org-key-ring.js';
import type { BillingClient } from '../peers/billing-client.js';
import type { VaultRow, VaultStore } from '../vaults/vault-store.js';
import {
  KEY_MATERIAL_TYPES,
  checkRotateInput,
  checkSecretInput,
  generateValue,
  secretPath,
  secretType,
} from './secret-fns.js';
import type { SecretRow, SecretStore } from './secret-store.js';
import type { RotateRequest, SecretInput, SecretRequest } from './secret-types.js';

/** Settings of the data-key cache (SPEC §8: 300 s, 5,000 entries). */
export interface DataKeyCacheOptions {
  ttlMs: number;
  size: number;
}

/** A decrypted secret version. */
export interface SecretValue {
  row: SecretRow;
  value: Buffer;
}

/**
 * SPEC §5.10: a user whose setting `require_passkey_for_vaults` is on (the `pkv` claim) reads
 * secrets only with an `X-Passkey-Token`. Passkeys arrive with their own issue; until a token can
 * be verified, such a read is refused whether or not a token is sent.
 */
export function requirePasskeyUnlock(p: Principal, passkeyToken: string): void {
  if (p.kind !== 'user' || !p.requirePasskeyForVaults) return;
  throw new PermissionDeniedError(
    passkeyToken
      ? 'the X-Passkey-Token is not valid'
      : 'this account requires a passkey unlock: send X-Passkey-Token with secret reads',
    { type: 'passkey_required' },
  );
}

function addressOf(row: SecretRow): VersionAddress {
  return { orgId: row.orgId, vaultId: row.vaultId, path: row.path, version: row.version };
}

/**
 * Secret rules: validation, access (owner/admin or policy), tier cap, envelope encryption with a
 * per-version data key wrapped by the org KEK, expiry and read limits (410), lazy re-wrapping
 * after an org key rotation.
 */
export class SecretService {
  private readonly dataKeys: ExpiringLru<Buffer>;

  constructor(
    private readonly deps: {
      vaults: VaultStore;
      secrets: SecretStore;
      access: AccessService;
      limits: Pick<BillingClient, 'limitsOf'>;
      ring: OrgKeyRing;
      audit: VaultCryptoAudit;
      logger: Logger;
    },
    private readonly cache: DataKeyCacheOptions,
  ) {
    this.dataKeys = new ExpiringLru(cache.size, (key) => key.fill(0));
  }

  /** The vault a secret operation addresses, as the caller may see it. */
  private async vault(p: Principal, vaultId: string): Promise<VaultRow> {
    const v = isUuid(vaultId) ? await this.deps.vaults.get(vaultId) : undefined;
    return this.deps.access.visible(p, v, vaultId);
  }

  /** Stores a new version at a path (PUT). */
  async put(p: Principal, vaultId: string, rawPath: string, request: SecretRequest): Promise<SecretRow> {
    const path = secretPath(rawPath);
    const v = await this.vault(p, vaultId);
    const input = checkSecretInput(request, new Date());
    await this.deps.access.authorize(p, v, path, 'write');
    return this.store(p, v, path, input, 'secret.write');
  }

  /** Stores a new version with a server-generated value (secret-rotate). */
  async rotate(p: Principal, vaultId: string, rawPath: string, request: RotateRequest): Promise<SecretRow> {
    const path = secretPath(rawPath);
    const v = await this.vault(p, vaultId);
    const input = checkRotateInput(request);
    await this.deps.access.authorize(p, v, path, 'write');
    const previous = await this.deps.secrets.find(v.id, path);
    const value = generateValue(input);
    try {
      return await this.store(
        p,
        v,
        path,
        {
          type:
            input.type ??
            (previous && previous.type !== 'env_bundle' ? secretType(previous.type) : 'password'),
          value,
          metadata: (previous?.metadata as Record<string, unknown> | null) ?? null,
          expiresAt: null,
          maxAccessCount: null,
          rotationPolicy: (previous?.rotationPolicy as Record<string, unknown> | null) ?? null,
        },
        'secret.rotated',
      );
    } finally {
      value.fill(0);
    }
  }

  private async store(
    p: Principal,
    v: VaultRow,
    path: string,
    input: SecretInput,
    action: 'secret.write' | 'secret.rotated',
  ): Promise<SecretRow> {
    const limits = await this.deps.limits.limitsOf(v.orgId);
    // The ring hands out a copy of the KEK, zeroed below: a cache eviction meanwhile cannot touch it.
    const kek = await this.deps.ring.active(v.orgId);
    const actor = actorOf(p);
    const audit = (tx: Transaction, r: SecretRow) =>
      this.deps.audit.by(
        p,
        action,
        { type: 'secret', id: r.id },
        { vault_id: v.id, path, version: r.version, type: r.type },
      )(tx);
    // The data key is zeroed as soon as it is wrapped (sealVersion); the KEK when the insert is done.
    const sealInput = (version: number) => ({
      type: input.type,
      ...sealVersion(kek, { orgId: v.orgId, vaultId: v.id, path, version }, input.value),
      metadata: input.metadata,
      expiresAt: input.expiresAt,
      maxAccessCount: input.maxAccessCount,
      rotationPolicy: input.rotationPolicy,
      createdBy: actor.actorId,
      createdByType: actor.actorType,
    });
    const at = { orgId: v.orgId, vaultId: v.id, path };
    const row = await this.deps.audit
      .failClosed(action, async () => {
        // A path with a live version takes the short way (no tier cap to count); a new one the long.
        const next = await this.deps.secrets.insertNextLiveVersion(at, sealInput, (r) =>
          this.deps.audit.rowOf(
            p,
            action,
            { type: 'secret', id: r.id },
            {
              vault_id: v.id,
              path,
              version: r.version,
              type: r.type,
            },
          ),
        );
        if (next !== 'new_path') return next;
        return this.deps.secrets.insertNextVersion(at, limits.maxSecrets, sealInput, audit);
      })
      .finally(() => kek.key.fill(0));
    if (row === 'cap') throw new ResourceLimitExceededError('secrets', limits.maxSecrets, limits.plan);
    return row;
  }

  /**
   * Reads and decrypts the latest (or a named) version, counting the read. 404 when nothing lives
   * at the path; 410 when the version is disabled, expired or out of reads; 403 for key material
   * to an agent with the Intents API.
   */
  async read(
    p: Principal,
    vaultId: string,
    rawPath: string,
    version: number,
    passkeyToken = '',
  ): Promise<SecretValue> {
    const path = secretPath(rawPath);
    // The vault and the version in one round trip; the vault's rules still come first.
    const at = isUuid(vaultId) ? await this.deps.secrets.findWithVault(vaultId, path, version) : undefined;
    const v = this.deps.access.visible(p, at?.vault, vaultId);
    requirePasskeyUnlock(p, passkeyToken);
    await this.deps.access.authorize(p, v, path, 'read');
    if (!at?.secret) throw new NotFoundError('secret', path);
    return this.readAuthorized(p, v, at.secret);
  }

  /**
   * Reads an authorized version (ARCHITECTURE §1): the value is decrypted first, so a KMS failure
   * costs no read; then the read is counted (when limited) and its `secret.read` record committed in
   * one transaction; only then does the value leave. If that transaction fails, nothing is returned.
   */
  private async readAuthorized(
    p: Principal,
    v: VaultRow,
    found: SecretRow,
    purpose?: string,
  ): Promise<SecretValue> {
    if (p.kind === 'agent' && p.intentsApiEnabled && KEY_MATERIAL_TYPES.has(found.type)) {
      throw new PermissionDeniedError(
        `an agent with the Intents API enabled cannot read ${found.type} secrets; sign through the Intents API`,
      );
    }
    if (found.isDisabled) throw new GoneError('this secret version is disabled');
    if (found.expiresAt && found.expiresAt.getTime() <= Date.now())
      throw new GoneError('this secret has expired');
    const value = await this.openVersion(found);
    try {
      const audit = this.deps.audit.by(
        p,
        'secret.read',
        { type: 'secret', id: found.id },
        {
          vault_id: v.id,
          path: found.path,
          version: found.version,
          type: found.type,
          ...(purpose ? { purpose } : {}),
        },
      );
      // A version without a read limit has nothing to count: its record alone is committed, in a
      // group commit with the records of concurrent reads (one INSERT, one WAL flush for all).
      const row =
        found.maxAccessCount === null
          ? await this.deps.audit.failClosed('secret.read', async () => {
              await audit.grouped();
              return found;
            })
          : await this.deps.audit.failClosed('secret.read', () =>
              this.deps.secrets.recordRead(found, (tx) => audit(tx)),
            );
      if (!row) throw new GoneError('this secret has reached its max_access_count or expired');
      return { row, value };
    } catch (err) {
      value.fill(0);
      throw err;
    }
  }

  /**
   * Decrypts a stored version's value (no access check, no counting: callers authorize first);
   * the data key comes from the cache or is unwrapped by the org KEK. The caller zeroes the result.
   */
  async openVersion(row: SecretRow): Promise<Buffer> {
    const at = addressOf(row);
    const cacheKey = `${row.id}:${row.kekVersion}`;
    let dataKey = this.dataKeys.get(cacheKey, Date.now());
    if (!dataKey) {
      const kek = await this.deps.ring.key(row.orgId, row.kekVersion);
      try {
        dataKey = unwrapDataKey(kek, row.wrappedDataKey, dataKeyAad(at, row.kekVersion));
      } finally {
        kek.fill(0);
      }
      this.dataKeys.set(cacheKey, dataKey, Date.now() + this.cache.ttlMs);
      this.rewrapLater(row, dataKey);
    }
    const plaintext = open(dataKey, { ciphertext: row.ciphertext, iv: row.iv, tag: row.tag }, valueAad(at));
    if (this.cache.size <= 0) dataKey.fill(0);
    return plaintext;
  }

  // After an org key rotation, a version still wrapped by an older KEK is re-wrapped by the active
  // one on its next uncached read; the old KEK version stays, so nothing is stranded meanwhile.
  private rewrapLater(row: SecretRow, dataKey: Buffer): void {
    const copy = Buffer.from(dataKey);
    void (async () => {
      const active = await this.deps.ring.activeVersionNumber(row.orgId);
      if (active === undefined || active <= row.kekVersion) return;
      const kek = await this.deps.ring.key(row.orgId, active);
      let wrapped: Buffer;
      try {
        wrapped = wrapDataKey(kek, copy, dataKeyAad(addressOf(row), active));
      } finally {
        kek.fill(0);
      }
      await this.deps.secrets.rewrap(row.id, row.kekVersion, wrapped, active);
    })()
      .catch((err: unknown) =>
        this.deps.logger.warn(
          { err: err instanceof Error ? err.name : 'error', secretVersionId: row.id },
          'lazy re-wrap failed',
        ),
      )
      .finally(() => copy.fill(0));
  }

  /** The latest version's metadata of every path the caller may read, never a value. */
  async list(p: Principal, vaultId: string, prefix: string): Promise<SecretRow[]> {
    if (prefix.length > 512)
      throw new InvalidArgumentError('prefix', 'prefix must be at most 512 characters');
    // Postgres text cannot hold NUL: refuse it rather than fail the query.
    if (prefix.includes('\u0000'))
      throw new InvalidArgumentError('prefix', 'prefix must not contain NUL characters');
    const v = await this.vault(p, vaultId);
    const rows = await this.deps.secrets.listLatest(v.id, prefix);
    const readable = await this.deps.access.readable(
      p,
      v,
      rows.map((r) => r.path),
    );
    return rows.filter((r) => readable.has(r.path));
  }

  /** Every version's metadata of a path. */
  async versions(p: Principal, vaultId: string, rawPath: string): Promise<SecretRow[]> {
    const path = secretPath(rawPath);
    const v = await this.vault(p, vaultId);
    await this.deps.access.authorize(p, v, path, 'read');
    const rows = await this.deps.secrets.listVersions(v.id, path);
    if (rows.length === 0) throw new NotFoundError('secret', path);
    return rows;
  }

  /** Soft-deletes every version of a path. */
  async delete(p: Principal, vaultId: string, rawPath: string): Promise<void> {
    const path = secretPath(rawPath);
    const v = await this.vault(p, vaultId);
    await this.deps.access.authorize(p, v, path, 'write');
    const audit = this.deps.audit.by(
      p,
      'secret.deleted',
      { type: 'secret', id: `${v.id}/${path}` },
      { vault_id: v.id, path },
    );
    const done = await this.deps.audit.failClosed('secret.deleted', () =>
      this.deps.secrets.softDelete(v.id, path, (tx) => audit(tx)),
    );
    if (!done) throw new NotFoundError('secret', path);
  }

  /** Disables one version: it reads as 410 from then on. */
  async disable(p: Principal, vaultId: string, rawPath: string, version: number): Promise<SecretRow> {
    const path = secretPath(rawPath);
    if (!Number.isInteger(version) || version < 1)
      throw new InvalidArgumentError('version', 'version must be a positive integer');
    const v = await this.vault(p, vaultId);
    await this.deps.access.authorize(p, v, path, 'write');
    const audit = (tx: Transaction, r: SecretRow) =>
      this.deps.audit.by(
        p,
        'secret.version_disabled',
        { type: 'secret', id: r.id },
        { vault_id: v.id, path, version },
      )(tx);
    const row = await this.deps.audit.failClosed('secret.version_disabled', () =>
      this.deps.secrets.disable(v.id, path, version, audit),
    );
    if (!row) throw new NotFoundError('secret version', `${path}@${version}`);
    return row;
  }

  /**
   * Reads an env bundle at `path` of a vault for env resolution: undefined when absent, unreadable
   * by the caller, expired or exhausted (the resolution skips it rather than failing).
   */
  async readBundle(p: Principal, v: VaultRow, path: string): Promise<Buffer | undefined> {
    if (!(await this.deps.access.allowed(p, v, path, 'read'))) return undefined;
    // Only env bundles are read (and counted, and audited) here; anything else at the path is skipped.
    const found = await this.deps.secrets.find(v.id, path);
    if (!found || found.type !== 'env_bundle') return undefined;
    try {
      return (await this.readAuthorized(p, v, found, 'env_resolve')).value;
    } catch (err) {
      if (err instanceof NotFoundError || err instanceof GoneError) return undefined;
      throw err;
    }
  }
}
