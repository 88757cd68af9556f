import { and, desc, eq, isNotNull, isNull, or, sql } from 'drizzle-orm';
import { type Database, type Transaction, lockOrgResource } from '@custos/service-kit';
import { secretVersions, shares } from '../db/schema.js';
import type { SecretRow } from '../secrets/secret-store.js';
import { MAX_PASSPHRASE_ATTEMPTS } from './share-fns.js';

/** A stored share. */
export type ShareRow = typeof shares.$inferSelect;
/** What a new share stores (`created_at` is the database's clock). */
export type NewShare = Omit<typeof shares.$inferInsert, 'id' | 'createdAt'>;

type Db = Database | Transaction;

/** SQL of shares, and the read-only look-up of the secret versions they pin. */
export class ShareStore {
  constructor(private readonly db: Database) {}

  /** Runs `fn` in one transaction (a change and its audit record commit together). */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  /** A secret version by id, deleted ones included (callers decide what a deleted one means). */
  async version(id: string, tx: Db = this.db): Promise<SecretRow | undefined> {
    const [row] = await tx.select().from(secretVersions).where(eq(secretVersions.id, id));
    return row;
  }

  /** A share by id. */
  async get(id: string, tx: Db = this.db): Promise<ShareRow | undefined> {
    const [row] = await tx.select().from(shares).where(eq(shares.id, id));
    return row;
  }

  /**
   * Takes the org's share-creation lock (held to the end of `tx`) and counts the org's creations
   * in the last 60 seconds of the database's clock; with the lock, racing creations are counted
   * one after another and cannot pass the limit. Returns the count and the oldest in the window.
   */
  async lockAndCountRecent(
    tx: Transaction,
    orgId: string,
  ): Promise<{ count: number; oldest: Date | null; now: Date }> {
    await lockOrgResource(tx, orgId, 'share-create');
    const r = await tx.execute<{ n: string; oldest: Date | string | null; now: Date | string }>(sql`
      SELECT count(*) AS n, min(created_at) AS oldest, clock_timestamp() AS now
      FROM ${shares}
      WHERE org_id = ${orgId} AND created_at > clock_timestamp() - interval '60 seconds'`);
    const row = r.rows[0];
    return {
      count: Number(row?.n ?? 0),
      oldest: row?.oldest ? new Date(row.oldest) : null,
      now: new Date(row?.now ?? Date.now()),
    };
  }

  /** Inserts a share stamped with the database's clock (the rate limit's window uses the same clock). */
  async insert(tx: Transaction, values: NewShare): Promise<ShareRow> {
    const [row] = await tx
      .insert(shares)
      .values({ ...values, createdAt: sql`clock_timestamp()` })
      .returning();
    return row!;
  }

  /** Shares created by a principal, newest first. */
  async listOutbound(orgId: string, creatorId: string, creatorType: string): Promise<ShareRow[]> {
    return this.db
      .select()
      .from(shares)
      .where(
        and(eq(shares.orgId, orgId), eq(shares.createdBy, creatorId), eq(shares.createdByType, creatorType)),
      )
      .orderBy(desc(shares.createdAt), desc(shares.id));
  }

  /** Unrevoked shares addressed to a user (`user`, `creator`) or an agent (`agent`), newest first. */
  async listInbound(orgId: string, recipientId: string, kind: 'user' | 'agent'): Promise<ShareRow[]> {
    const types =
      kind === 'user'
        ? or(eq(shares.recipientType, 'user'), eq(shares.recipientType, 'creator'))
        : eq(shares.recipientType, 'agent');
    return this.db
      .select()
      .from(shares)
      .where(
        and(eq(shares.orgId, orgId), eq(shares.recipientId, recipientId), types, isNull(shares.revokedAt)),
      )
      .orderBy(desc(shares.createdAt), desc(shares.id));
  }

  /**
   * Reserves one passphrase check: counts it as an attempt unless the share already has
   * MAX_PASSPHRASE_ATTEMPTS (false: locked). A correct passphrase gives the slot back when the
   * access is counted, so only wrong ones stay counted, and however many checks race, no more
   * than the cap are ever evaluated.
   */
  async reservePassphraseAttempt(id: string): Promise<boolean> {
    const r = await this.db
      .update(shares)
      .set({ passphraseAttempts: sql`${shares.passphraseAttempts} + 1` })
      .where(and(eq(shares.id, id), sql`${shares.passphraseAttempts} < ${MAX_PASSPHRASE_ATTEMPTS}`))
      .returning({ id: shares.id });
    return r.length > 0;
  }

  /** Gives back a passphrase slot reserved by a correct passphrase whose access was then refused. */
  async releasePassphraseAttempt(id: string, tx: Db = this.db): Promise<void> {
    await tx
      .update(shares)
      .set({ passphraseAttempts: sql`greatest(${shares.passphraseAttempts} - 1, 0)` })
      .where(eq(shares.id, id));
  }

  /**
   * Counts one open if the share still opens at the database's clock — not revoked, not
   * declined, not expired, under its max_access_count — checked and incremented in this one
   * statement, so however many opens race, at most max_access_count succeed. `releaseSlot` also
   * gives back the passphrase slot the open reserved.
   */
  async countAccess(tx: Transaction, id: string, releaseSlot: boolean): Promise<ShareRow | undefined> {
    const [row] = await tx
      .update(shares)
      .set({
        accessCount: sql`${shares.accessCount} + 1`,
        ...(releaseSlot ? { passphraseAttempts: sql`greatest(${shares.passphraseAttempts} - 1, 0)` } : {}),
      })
      .where(
        and(
          eq(shares.id, id),
          isNull(shares.revokedAt),
          isNull(shares.declinedAt),
          sql`${shares.expiresAt} > now()`,
          sql`${shares.accessCount} < ${shares.maxAccessCount}`,
        ),
      )
      .returning();
    return row;
  }

  /** Marks a live share accepted (once) or declined; undefined when that no longer applies. */
  async decide(tx: Transaction, id: string, decision: 'accept' | 'decline'): Promise<ShareRow | undefined> {
    const [row] = await tx
      .update(shares)
      .set(decision === 'accept' ? { acceptedAt: sql`now()` } : { declinedAt: sql`now()` })
      .where(
        and(
          eq(shares.id, id),
          isNull(shares.revokedAt),
          isNull(shares.declinedAt),
          // Accepting is once; declining also closes a share accepted earlier.
          decision === 'accept' ? isNull(shares.acceptedAt) : undefined,
          sql`${shares.expiresAt} > now()`,
        ),
      )
      .returning();
    return row;
  }

  /**
   * Stores the hash of a new e-mailed-link secret on an external-e-mail share of `orgId` that still
   * opens at the database's clock (the one it replaces stops working); undefined otherwise.
   */
  async setMailSecret(
    tx: Transaction,
    id: string,
    orgId: string,
    hash: Buffer,
  ): Promise<ShareRow | undefined> {
    const [row] = await tx
      .update(shares)
      .set({ mailSecretHash: hash })
      .where(
        and(
          eq(shares.id, id),
          eq(shares.orgId, orgId),
          eq(shares.recipientType, 'external_email'),
          isNotNull(shares.recipientEmail),
          isNull(shares.revokedAt),
          isNull(shares.declinedAt),
          sql`${shares.expiresAt} > now()`,
          sql`${shares.accessCount} < ${shares.maxAccessCount}`,
        ),
      )
      .returning();
    return row;
  }

  /** Revokes a share; undefined when it was already revoked. */
  async revoke(tx: Transaction, id: string): Promise<ShareRow | undefined> {
    const [row] = await tx
      .update(shares)
      .set({ revokedAt: sql`now()` })
      .where(and(eq(shares.id, id), isNull(shares.revokedAt)))
      .returning();
    return row;
  }
}
