import { UnavailableError } from '@custos/service-kit';
import type { Principal } from './principal-types.js';

/**
 * What a revocation names: one token (`jti`), a session (`sid`), a subject before a time (`sub`), or
 * every token signed by a token-signing key an operator retired as compromised (`kid`).
 */
export type RevocationKind = 'jti' | 'sid' | 'sub' | 'kid';

/**
 * The Redis key of a revocation. Identity writes these (value `1`, or for `sub` the epoch second
 * before which tokens are revoked) with a TTL; the gateway reads them on every request.
 */
export function revocationKey(kind: RevocationKind, value: string): string {
  return `custos:revoked:${kind}:${value}`;
}

/**
 * Written by identity after it has copied every live revocation into Redis (`RevocationStore
 * republish`), and never expiring: its absence means Redis lost its data (a restart; it keeps
 * nothing on disk) and the list is not back yet. Same prefix as the revocations, so every verifier
 * may read it and only identity may write it (redis-acl.ts).
 */
export const REVOCATIONS_PUBLISHED_KEY = 'custos:revoked:published';

/** Options of the revocation check. */
export interface RevocationCheckOptions {
  /**
   * Refuse (503) while REVOCATIONS_PUBLISHED_KEY is missing, rather than take an empty Redis for
   * "nothing is revoked". On in every service (their wiring); off for a bare Redis in unit tests.
   */
  requirePublished?: boolean;
  /**
   * Counts each check by outcome (the service's `custos_token_revocation_checks_total`): `failed`
   * when Redis could not answer or its list is not restored, so the token was refused with 503.
   */
  outcomes?: { inc(labels: { outcome: RevocationOutcome }): void };
}

/** How a revocation check ended. */
export type RevocationOutcome = 'passed' | 'revoked' | 'failed';

/** The part of a Redis client the check needs. */
export interface RedisLike {
  mget(...keys: string[]): Promise<Array<string | null>>;
}

/** The `sub` claim of a principal. */
export function subjectOf(p: Principal): string {
  return p.kind === 'user' ? `user:${p.userId}` : `agent:${p.agentId}`;
}

/**
 * An `isRevoked` hook for TokenVerifier backed by Redis: one MGET per check. When Redis cannot be
 * asked the check fails closed with 503 rather than accept a token that may have been revoked.
 */
export function redisRevocationCheck(
  redis: RedisLike,
  opts: RevocationCheckOptions = {},
): (p: Principal, kid: string) => Promise<boolean> {
  const requirePublished = opts.requirePublished ?? false;
  const count = (outcome: RevocationOutcome) => opts.outcomes?.inc({ outcome });
  return async (p, kid) => {
    const keys = [
      revocationKey('jti', p.tokenId),
      revocationKey('sub', subjectOf(p)),
      revocationKey('kid', kid),
      REVOCATIONS_PUBLISHED_KEY,
    ];
    if (p.sessionId) keys.push(revocationKey('sid', p.sessionId));
    let values: Array<string | null>;
    try {
      values = await redis.mget(...keys);
    } catch {
      count('failed');
      throw new UnavailableError('token revocation status cannot be checked right now');
    }
    const [jti, subBefore, retiredKid, published, sid] = values;
    if (requirePublished && (published === null || published === undefined)) {
      count('failed');
      throw new UnavailableError('token revocations are being restored after a Redis restart; retry shortly');
    }
    const revoked =
      jti !== null ||
      retiredKid !== null ||
      (sid !== undefined && sid !== null) ||
      (subBefore !== null && subBefore !== undefined && p.issuedAt < Number(subBefore));
    count(revoked ? 'revoked' : 'passed');
    return revoked;
  };
}

/**
 * A health probe of a service's Redis: one real round trip (an MGET of the published marker, which
 * every service that checks tokens may read), so a Redis that accepts connections but does not answer
 * counts as down.
 */
export async function redisAnswers(redis: RedisLike): Promise<boolean> {
  await redis.mget(REVOCATIONS_PUBLISHED_KEY);
  return true;
}
