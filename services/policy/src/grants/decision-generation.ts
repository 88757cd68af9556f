import { randomUUID } from 'node:crypto';
import { type Logger, describeError } from '@custos/service-kit';
import { policyGenerationKey } from '@custos/service-kit/redis-acl';

/** The part of a Redis client a bump needs. */
export interface GenerationRedis {
  set(key: string, value: string): Promise<unknown>;
}

/**
 * Moves an org's decision generation in Redis to a value it never had before (a fresh UUID, not a
 * counter: a counter restarts at 0 when Redis loses its data, and answers cached under an old
 * number would match again) after a grant change commits (see
 * `policyGenerationKey`): vault-crypto trusts a cached decision only while the generation it was
 * stamped with is still the org's, so a removed grant or an added deny counts from the next read on
 * every replica. A bump that fails is logged and the change still stands (it is committed): cached
 * answers of the org then last until their own end, POLICY_DECISION_CACHE_TTL_MS at most.
 */
export function decisionGenerationBump(redis: GenerationRedis, logger: Logger) {
  return async (orgId: string): Promise<void> => {
    try {
      await redis.set(policyGenerationKey(orgId), randomUUID());
    } catch (err) {
      logger.error(
        { err: describeError(err), org_id: orgId },
        'decision generation not bumped: cached decisions of this org stand until they expire',
      );
    }
  };
}
