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
export function redisRevocationCheck(redis: RedisLike): (p: Principal, kid: string) => Promise<boolean> {
  return async (p, kid) => {
    const keys = [
      revocationKey('jti', p.tokenId),
      revocationKey('sub', subjectOf(p)),
      revocationKey('kid', kid),
    ];
    if (p.sessionId) keys.push(revocationKey('sid', p.sessionId));
    let values: Array<string | null>;
    try {
      values = await redis.mget(...keys);
    } catch {
      throw new UnavailableError('token revocation status cannot be checked right now');
    }
    const [jti, subBefore, retiredKid, sid] = values;
    if (jti !== null || retiredKid !== null || (sid !== undefined && sid !== null)) return true;
    return subBefore !== null && subBefore !== undefined && p.issuedAt < Number(subBefore);
  };
}
