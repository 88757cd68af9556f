import type { Redis } from 'ioredis';
import { sql } from 'drizzle-orm';
import type { Database, Logger } from '@custos/service-kit';
import { RevocationStore } from './revocation-store.js';

/** How long a revoked kid stays refused: the longest token lifetime (a day), and an hour more. */
const KID_REVOCATION_MS = 25 * 60 * 60 * 1000;

/**
 * Marks a signing key revoked and records a `kid` revocation in the same transaction, then mirrors
 * it to Redis. False when no key has that kid; throws when Redis did not take it (the revocation is
 * stored, and identity re-seeds Redis from Postgres within a minute of Redis answering).
 */
export async function retireCompromisedKey(
  db: Database,
  redis: Redis,
  logger: Logger,
  kid: string,
): Promise<boolean> {
  const revocations = new RevocationStore(db, redis, logger);
  const revocation = {
    kind: 'kid' as const,
    value: kid,
    expiresAt: new Date(Date.now() + KID_REVOCATION_MS),
  };
  const found = await db.transaction(async (tx) => {
    const { rows } = await tx.execute<{ found: boolean }>(
      sql`SELECT identity.revoke_signing_key(${kid}) AS found`,
    );
    if (!rows[0]?.found) return false;
    await revocations.record([revocation], tx);
    return true;
  });
  if (!found) return false;
  logger.warn({ kid }, 'token signing key revoked by an operator');
  // Throws (503) when Redis cannot take it: the caller says so, since until identity re-seeds Redis
  // (within a minute of Redis answering) other services still accept the kid's tokens.
  await revocations.publish([revocation]);
  return true;
}
