import { and, eq, gt, sql } from 'drizzle-orm';
import type { Redis } from 'ioredis';
import { type Database, UnavailableError, describeError, type Logger } from '@custos/service-kit';
import { REVOCATIONS_PUBLISHED_KEY, type RevocationKind, revocationKey } from '@custos/auth';
import { revocations } from '../db/schema.js';

/** One revocation, to be recorded in a transaction and published after it commits. */
export interface Revocation {
  kind: RevocationKind;
  value: string;
  expiresAt: Date;
  notBefore?: Date;
}

type Tx = Parameters<Parameters<Database['transaction']>[0]>[0] | Database;

/**
 * Revocations: durable in Postgres, and mirrored to Redis where the gateway checks them on every
 * request. A revocation is written to both before the caller is answered; `republish` copies the
 * unexpired ones back into Redis after a Redis restart (it runs at start and every minute).
 */
export class RevocationStore {
  constructor(
    private readonly db: Database,
    private readonly redis: Redis,
    private readonly logger: Logger,
  ) {}

  /** Revokes one access token until it would have expired anyway. */
  revokeToken(jti: string, expiresAt: Date): Promise<void> {
    return this.revoke('jti', jti, expiresAt);
  }

  /** Revokes every token of a session (refresh-token family) until `expiresAt`. */
  revokeSession(sid: string, expiresAt: Date): Promise<void> {
    return this.revoke('sid', sid, expiresAt);
  }

  /** Revokes every token of a subject (`user:<id>`, `agent:<id>`) issued before `notBefore`. */
  revokeSubjectBefore(sub: string, notBefore: Date, expiresAt: Date): Promise<void> {
    return this.revoke('sub', sub, expiresAt, notBefore);
  }

  private async revoke(
    kind: RevocationKind,
    value: string,
    expiresAt: Date,
    notBefore?: Date,
  ): Promise<void> {
    const r: Revocation = { kind, value, expiresAt, ...(notBefore ? { notBefore } : {}) };
    await this.record([r]);
    await this.publish([r]);
  }

  /**
   * Stores revocations durably, in `tx` when the change they belong to (and its audit record) is
   * written there; call `publish` with them once that transaction has committed.
   */
  async record(list: Revocation[], tx: Tx = this.db): Promise<void> {
    for (const r of list) {
      await tx
        .insert(revocations)
        .values({ kind: r.kind, value: r.value, expiresAt: r.expiresAt, notBefore: r.notBefore ?? null })
        .onConflictDoUpdate({
          target: [revocations.kind, revocations.value],
          set: {
            expiresAt: sql`greatest(${revocations.expiresAt}, excluded.expires_at)`,
            notBefore: r.notBefore ?? null,
          },
        });
    }
  }

  /** Mirrors recorded revocations to Redis; 503 when it cannot (they are stored and republished). */
  async publish(list: Revocation[]): Promise<void> {
    try {
      for (const r of list) await this.mirror(r.kind, r.value, r.expiresAt, r.notBefore);
    } catch (err) {
      this.logger.error(
        { err: describeError(err), kind: list[0]?.kind },
        'revocation stored but not yet mirrored to Redis',
      );
      throw new UnavailableError('revocation could not be applied everywhere yet; it is stored and will be');
    }
  }

  private async mirror(
    kind: RevocationKind,
    value: string,
    expiresAt: Date,
    notBefore?: Date,
  ): Promise<void> {
    const entry = mirrorEntry(kind, value, expiresAt, notBefore);
    if (entry) await this.redis.set(entry.key, entry.payload, 'PX', entry.ttlMs);
  }

  /** True when a session (refresh-token family) has been revoked; reads Postgres, the source of truth. */
  async isSessionRevoked(sid: string, tx: Pick<Database, 'select'> = this.db): Promise<boolean> {
    const rows = await tx
      .select({ value: revocations.value })
      .from(revocations)
      .where(
        and(eq(revocations.kind, 'sid'), eq(revocations.value, sid), gt(revocations.expiresAt, new Date())),
      );
    return rows.length > 0;
  }

  /**
   * Copies every unexpired revocation into Redis (the SETs sent together), then sets the published
   * marker that verifiers require (REVOCATIONS_PUBLISHED_KEY): until the list is complete again after
   * a Redis restart, tokens are refused rather than checked against an empty Redis. Returns how many.
   */
  async republish(): Promise<number> {
    const rows = await this.db.select().from(revocations).where(gt(revocations.expiresAt, new Date()));
    // Sent together (ioredis writes commands without waiting for earlier replies), answered in order.
    await Promise.all(
      rows.flatMap((r) => {
        const entry = mirrorEntry(r.kind as RevocationKind, r.value, r.expiresAt, r.notBefore ?? undefined);
        return entry ? [this.redis.set(entry.key, entry.payload, 'PX', entry.ttlMs)] : [];
      }),
    );
    await this.redis.set(REVOCATIONS_PUBLISHED_KEY, new Date().toISOString());
    await this.db.delete(revocations).where(sql`${revocations.expiresAt} < now() - interval '1 day'`);
    return rows.length;
  }
}

/** The Redis key, value and TTL of one revocation; undefined once it has expired. */
function mirrorEntry(
  kind: RevocationKind,
  value: string,
  expiresAt: Date,
  notBefore?: Date,
): { key: string; payload: string; ttlMs: number } | undefined {
  // Verifiers accept a token a few seconds past `exp` (clock tolerance): outlive that too.
  const ttlMs = expiresAt.getTime() - Date.now() + 60_000;
  if (ttlMs <= 0) return undefined;
  const payload = kind === 'sub' ? String(Math.ceil((notBefore ?? new Date()).getTime() / 1000)) : '1';
  return { key: revocationKey(kind, value), payload, ttlMs };
}
