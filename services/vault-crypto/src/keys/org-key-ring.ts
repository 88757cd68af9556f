import { and, desc, eq } from 'drizzle-orm';
import { type Database, ExpiringLru, type Logger } from '@custos/service-kit';
import { orgKeys } from '../db/schema.js';
import { newKey } from '../crypto/envelope-fns.js';
import type { KmsProvider } from '../kms/kms-types.js';

/** Settings of an OrgKeyRing. */
export interface OrgKeyRingOptions {
  /** A KEK version older than this wraps no new data key: the next write starts a new version. */
  rotationMs: number;
  /** How long an unwrapped KEK stays in memory. */
  cacheTtlMs: number;
  /** How many unwrapped KEKs stay in memory. */
  cacheSize: number;
  now?: () => number;
}

/** An org KEK version in the clear, for synchronous use right after it is obtained. */
export interface OrgKek {
  version: number;
  key: Buffer;
}

const ACTIVE_TTL_MS = 30_000;

/** The KMS context a KEK version is wrapped under: a wrapped KEK moved to another org fails. */
export function kekContext(orgId: string, version: number): string {
  return `custos:org-kek:${orgId}:${version}`;
}

/**
 * Each org's key-encryption keys. A KEK is a random 256-bit key wrapped by the KMS provider and
 * stored per version; it is created on first use, replaced after `rotationMs` (or on demand), and
 * never deleted, so data keys wrapped by an old version stay readable and are re-wrapped lazily.
 * Unwrapped KEKs are cached (bounded, expiring) and zeroed when they leave the cache; callers use
 * a KEK synchronously after obtaining it and never keep it across an await.
 */
export class OrgKeyRing {
  private readonly cache: ExpiringLru<Buffer>;
  private readonly activeVersion: ExpiringLru<{ version: number; createdAt: number }>;
  private readonly now: () => number;

  constructor(
    private readonly db: Database,
    private readonly kms: KmsProvider,
    private readonly options: OrgKeyRingOptions,
    private readonly logger: Logger,
  ) {
    this.cache = new ExpiringLru(options.cacheSize, (key) => key.fill(0));
    this.activeVersion = new ExpiringLru(Math.max(options.cacheSize, 1));
    this.now = options.now ?? Date.now;
  }

  /** The version that wraps new data keys (a copy of the key: see `key`), creating it when due. */
  async active(orgId: string): Promise<OrgKek> {
    let current = await this.currentVersion(orgId);
    if (!current || this.now() - current.createdAt >= this.options.rotationMs) {
      current = await this.createVersion(orgId, (current?.version ?? 0) + 1);
    }
    return { version: current.version, key: await this.key(orgId, current.version) };
  }

  /** The version number that wraps new data keys now (undefined before the org's first write). */
  async activeVersionNumber(orgId: string): Promise<number | undefined> {
    return (await this.currentVersion(orgId))?.version;
  }

  /**
   * KEK version `version` of the org, unwrapped through the KMS provider on a cache miss. The caller
   * gets its own copy and zeroes it after use: the cached buffer is zeroed when it is evicted, which
   * may happen while the caller still needs the key.
   */
  async key(orgId: string, version: number): Promise<Buffer> {
    return Buffer.from(await this.cachedKey(orgId, version));
  }

  private async cachedKey(orgId: string, version: number): Promise<Buffer> {
    const cacheKey = `${orgId}:${version}`;
    const hit = this.cache.get(cacheKey, this.now());
    if (hit) return hit;
    const [row] = await this.db
      .select({ wrappedKey: orgKeys.wrappedKey })
      .from(orgKeys)
      .where(and(eq(orgKeys.orgId, orgId), eq(orgKeys.version, version)));
    if (!row) throw new Error(`org key version ${version} is missing`);
    const key = await this.kms.unwrapKey(row.wrappedKey, kekContext(orgId, version));
    // Another caller may have filled the slot while we waited on the KMS: keep theirs, zero ours.
    const raced = this.cache.get(cacheKey, this.now());
    if (raced) {
      key.fill(0);
      return raced;
    }
    this.cache.set(cacheKey, key, this.now() + this.options.cacheTtlMs);
    return key;
  }

  /** Starts a new KEK version now (an admin's on-demand rotation); returns its number. */
  async rotate(orgId: string): Promise<number> {
    const current = await this.currentVersion(orgId, true);
    return (await this.createVersion(orgId, (current?.version ?? 0) + 1)).version;
  }

  private async currentVersion(
    orgId: string,
    fresh = false,
  ): Promise<{ version: number; createdAt: number } | undefined> {
    if (!fresh) {
      const hit = this.activeVersion.get(orgId, this.now());
      if (hit) return hit;
    }
    const [row] = await this.db
      .select({ version: orgKeys.version, createdAt: orgKeys.createdAt })
      .from(orgKeys)
      .where(eq(orgKeys.orgId, orgId))
      .orderBy(desc(orgKeys.version))
      .limit(1);
    if (!row) return undefined;
    const v = { version: row.version, createdAt: row.createdAt.getTime() };
    this.activeVersion.set(orgId, v, this.now() + ACTIVE_TTL_MS);
    return v;
  }

  // Racing creators of the same version agree through the primary key: one insert wins, all read it.
  private async createVersion(
    orgId: string,
    version: number,
  ): Promise<{ version: number; createdAt: number }> {
    const kek = newKey();
    try {
      const wrapped = await this.kms.wrapKey(kek, kekContext(orgId, version));
      await this.db
        .insert(orgKeys)
        .values({
          orgId,
          version,
          wrappedKey: wrapped,
          provider: this.kms.name,
          createdAt: new Date(this.now()),
        })
        .onConflictDoNothing();
    } finally {
      kek.fill(0);
    }
    const latest = await this.currentVersion(orgId, true);
    if (!latest) throw new Error('org key version was not stored');
    if (latest.version === version)
      this.logger.info({ orgId, version }, 'org key-encryption key version created');
    return latest;
  }
}
