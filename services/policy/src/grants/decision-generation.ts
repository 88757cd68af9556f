import { type Logger, describeError } from '@custos/service-kit';
import { policyGenerationKey } from '@custos/service-kit/redis-acl';

/** The part of a Redis client a bump needs. */
export interface GenerationRedis {
  incr(key: string): Promise<number>;
}

/**
 * Bumps an org's decision generation in Redis after a grant change commits (see
 * `policyGenerationKey`): vault-crypto trusts a cached decision only while the generation it was
 * stamped with is still the org's, so a removed grant or an added deny counts from the next read on
 * every replica. A bump that fails is logged and the change still stands (it is committed): cached
 * answers of the org then last until their own end, POLICY_DECISION_CACHE_TTL_MS at most.
 */
export function decisionGenerationBump(redis: GenerationRedis, logger: Logger) {
  return async (orgId: string): Promise<void> => {
    try {
      await redis.incr(policyGenerationKey(orgId));
    } catch (err) {
      logger.error(
        { err: describeError(err), org_id: orgId },
        'decision generation not bumped: cached decisions of this org stand until they expire',
      );
    }
  };
}
