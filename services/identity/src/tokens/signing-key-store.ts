import type { KeyObject } from 'node:crypto';
import { and, asc, isNull, sql } from 'drizzle-orm';
import type { Database, Logger } from '@custos/service-kit';
import { signingKeys } from '../db/schema.js';
import { type PublicJwk, checkedSigningKey, generateSigningKey, sealPrivateKey } from './signing-key-fns.js';

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
  privateKey: KeyObject;
  /** The sealed bytes the key was checked from: a changed row is checked again. */
  sealed: Buffer;
}

/**
 * The ring of token-signing keys, shared by all identity replicas through Postgres. One key is
 * active; rotation adds a new one and retires the old, which keeps verifying until every token it
 * signed has expired, so rotation logs nobody out.
 *
 * A row is trusted only if its private half opens under the KEK and derives its kid and public key
 * (checkedSigningKey): whoever can write the table but does not hold the KEK cannot get a key
 * published. Such rows are ignored and logged once. A key an operator revoked (`revoked_at`, see
 * retire-key.ts) is neither used nor published.
 */
export class SigningKeyRing {
  private keys: LoadedKey[] = [];
  private readonly refused = new Set<string>();

  constructor(
    private readonly db: Database,
    private readonly opts: SigningKeyOptions,
    private readonly logger: Logger,
  ) {}

  /** Loads the ring, creating or rotating the active key when due; safe to run on every replica. */
  async refresh(now = new Date()): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.execute(sql`SELECT pg_advisory_xact_lock(hashtext('custos.identity.signing-keys'))`);
      const active = await tx
        .select()
        .from(signingKeys)
        .where(and(isNull(signingKeys.retiredAt), isNull(signingKeys.revokedAt)));
      // The newest genuine unretired key signs; a row that fails the check never does.
      const current = active
        .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime())
        .find((r) => this.check(r) !== undefined);
      if (!current || now.getTime() - current.createdAt.getTime() >= this.opts.rotationMs) {
        const k = generateSigningKey();
        await tx.execute(
          sql`SELECT identity.insert_signing_key(${k.kid}, ${JSON.stringify(k.publicJwk)}::jsonb, ${sealPrivateKey(k.privateKeyDer, this.opts.kek, k.kid)}, ${now})`,
        );
        k.privateKeyDer.fill(0);
        await tx.execute(sql`SELECT identity.retire_signing_keys(${k.kid})`);
        this.logger.info({ kid: k.kid, rotated_from: current?.kid ?? null }, 'token signing key created');
      }
      await tx.execute(
        sql`SELECT identity.prune_signing_keys(make_interval(secs => ${this.opts.retiredKeyTtlMs / 1000}))`,
      );
    });
    const rows = await this.db.select().from(signingKeys).orderBy(asc(signingKeys.createdAt));
    const previous = new Map(this.keys.map((k) => [k.kid, k]));
    const keys: LoadedKey[] = [];
    for (const r of rows) {
      // Refused everywhere through the `kid` revocation retire-key wrote beside it.
      if (r.revokedAt !== null) continue;
      // Past the longest token lifetime a retired key verifies nothing (pruned soon after).
      if (r.retiredAt !== null && now.getTime() - r.retiredAt.getTime() > this.opts.retiredKeyTtlMs) continue;
      const prev = previous.get(r.kid);
      const checked =
        prev && prev.sealed.equals(r.privateKeyEnc)
          ? { publicJwk: prev.publicJwk, privateKey: prev.privateKey }
          : this.check(r);
      if (!checked) continue;
      keys.push({
        kid: r.kid,
        publicJwk: checked.publicJwk,
        privateKey: checked.privateKey,
        createdAt: r.createdAt,
        retiredAt: r.retiredAt,
        sealed: r.privateKeyEnc,
      });
    }
    this.keys = keys;
  }

  /** The checked key of a row, or undefined (logged once per kid) for a row that is not genuine. */
  private check(r: { kid: string; publicJwk: unknown; privateKeyEnc: Buffer }) {
    const checked = checkedSigningKey(r, this.opts.kek);
    if (!checked && !this.refused.has(r.kid)) {
      this.refused.add(r.kid);
      this.logger.error(
        { kid: r.kid },
        'signing key row does not open under TOKEN_SIGNING_KEK or does not match its public key; ignored (neither used nor published)',
      );
    }
    return checked;
  }

  /** The key that signs new tokens. */
  active(): { kid: string; privateKey: KeyObject } {
    const k = [...this.keys].reverse().find((x) => x.retiredAt === null);
    if (!k) throw new Error('no active signing key loaded');
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
