import type { KeyObject } from 'node:crypto';
import { asc, isNull, sql } from 'drizzle-orm';
import type { Database, Logger } from '@custos/service-kit';
import { signingKeys } from '../db/schema.js';
import { type PublicJwk, generateSigningKey, openPrivateKey, sealPrivateKey } from './signing-key-fns.js';

/** Settings of the signing-key ring. */
export interface SigningKeyOptions {
  kek: Buffer;
  /** A key signs new tokens for this long before a new one replaces it. */
  rotationMs: number;
  /** A retired key stays in the JWKS this long (the longest token lifetime), then leaves it. */
  retiredKeyTtlMs: number;
}

interface LoadedKey {
  kid: string;
  publicJwk: PublicJwk;
  createdAt: Date;
  retiredAt: Date | null;
  privateKey?: KeyObject;
}

/**
 * The ring of token-signing keys, shared by all identity replicas through Postgres. One key is
 * active; rotation adds a new one and retires the old, which keeps verifying until every token it
 * signed has expired, so rotation logs nobody out.
 */
export class SigningKeyRing {
  private keys: LoadedKey[] = [];

  constructor(
    private readonly db: Database,
    private readonly opts: SigningKeyOptions,
    private readonly logger: Logger,
  ) {}

  /** Loads the ring, creating or rotating the active key when due; safe to run on every replica. */
  async refresh(now = new Date()): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.execute(sql`SELECT pg_advisory_xact_lock(hashtext('custos.identity.signing-keys'))`);
      const active = await tx.select().from(signingKeys).where(isNull(signingKeys.retiredAt));
      const current = active.sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime())[0];
      // A key the configured KEK cannot open (the KEK was replaced or lost) is retired and a new one
      // takes over; its public half keeps verifying the tokens it signed until they expire.
      const unreadable = current !== undefined && !this.canOpen(current.privateKeyEnc, current.kid);
      if (unreadable)
        this.logger.error(
          { kid: current.kid },
          'active signing key cannot be decrypted with TOKEN_SIGNING_KEK; replacing it',
        );
      if (!current || unreadable || now.getTime() - current.createdAt.getTime() >= this.opts.rotationMs) {
        const k = generateSigningKey();
        await tx.insert(signingKeys).values({
          kid: k.kid,
          publicJwk: k.publicJwk,
          privateKeyEnc: sealPrivateKey(k.privateKeyDer, this.opts.kek, k.kid),
          createdAt: now,
        });
        k.privateKeyDer.fill(0);
        await tx
          .update(signingKeys)
          .set({ retiredAt: now })
          .where(sql`${signingKeys.retiredAt} IS NULL AND ${signingKeys.kid} <> ${k.kid}`);
        this.logger.info({ kid: k.kid, rotated_from: current?.kid ?? null }, 'token signing key created');
      }
      await tx
        .delete(signingKeys)
        .where(sql`${signingKeys.retiredAt} < ${new Date(now.getTime() - this.opts.retiredKeyTtlMs)}`);
    });
    const rows = await this.db.select().from(signingKeys).orderBy(asc(signingKeys.createdAt));
    const previous = new Map(this.keys.map((k) => [k.kid, k]));
    this.keys = rows.map((r) => ({
      kid: r.kid,
      publicJwk: r.publicJwk as PublicJwk,
      createdAt: r.createdAt,
      retiredAt: r.retiredAt,
      ...(r.retiredAt === null
        ? {
            privateKey:
              previous.get(r.kid)?.privateKey ?? openPrivateKey(r.privateKeyEnc, this.opts.kek, r.kid),
          }
        : {}),
    }));
  }

  private canOpen(sealed: Buffer, kid: string): boolean {
    try {
      openPrivateKey(sealed, this.opts.kek, kid);
      return true;
    } catch {
      return false;
    }
  }

  /** The key that signs new tokens. */
  active(): { kid: string; privateKey: KeyObject } {
    const k = [...this.keys].reverse().find((x) => x.retiredAt === null && x.privateKey);
    if (!k?.privateKey) throw new Error('no active signing key loaded');
    return { kid: k.kid, privateKey: k.privateKey };
  }

  /** The public key that signs new tokens. */
  activePublicJwk(): PublicJwk {
    const kid = this.active().kid;
    return this.keys.find((k) => k.kid === kid)!.publicJwk;
  }

  /** The public keys that verify tokens: the active key and retired keys still within their TTL. */
  jwks(): { keys: PublicJwk[] } {
    return { keys: this.keys.map((k) => k.publicJwk) };
  }
}
