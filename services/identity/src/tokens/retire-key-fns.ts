import type { Redis } from 'ioredis';
import { eq, sql } from 'drizzle-orm';
import type { Database, Logger } from '@custos/service-kit';
import { signingKeys } from '../db/schema.js';
import { RevocationStore } from './revocation-store.js';

/** How long a revoked kid stays refused: the longest token lifetime (a day), and an hour more. */
const KID_REVOCATION_MS = 25 * 60 * 60 * 1000;

/**
 * Marks a signing key revoked and records a `kid` revocation in the same transaction, then mirrors
 * it to Redis (when Redis is down it is re-seeded from Postgres within a minute of its return).
 * False when no key has that kid.
 */
export async function retireCompromisedKey(
  db: Database,
  redis: Redis,
  logger: Logger,
  kid: string,
): Promise<boolean> {
  const revocations = new RevocationStore(db, redis, logger);
  const revocation = { kind: 'kid' as const, value: kid, expiresAt: new Date(Date.now() + KID_REVOCATION_MS) };
  const found = await db.transaction(async (tx) => {
    const rows = await tx
      .update(signingKeys)
      .set({ revokedAt: sql`now()`, retiredAt: sql`coalesce(${signingKeys.retiredAt}, now())` })
      .where(eq(signingKeys.kid, kid))
      .returning({ kid: signingKeys.kid });
    if (rows.length === 0) return false;
    await revocations.record([revocation], tx);
    return true;
  });
  if (!found) return false;
  logger.warn({ kid }, 'token signing key revoked by an operator');
  await revocations.publish([revocation]).catch(() => undefined);
  return true;
}
