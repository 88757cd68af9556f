import type { Principal } from '@custos/auth';
import { QUOTA_WINDOW_MS, featureLimit, quotaWindowStart, requireUser } from './account-fns.js';
import type { AccountStore } from './account-store.js';

/** The outcome of one quota call (the response shape of the reference). */
export interface QuotaView {
  allowed: boolean;
  limit: number;
  remaining: number;
  resetAt: Date;
}

/**
 * Per-user feature quotas in fixed UTC hour windows (SPEC.md §8: `voice_brief`, 30 an hour). A
 * call is counted by one atomic upsert, so parallel calls never exceed the limit. A call over the
 * limit is answered `allowed: false` and is not counted.
 */
export class QuotaService {
  constructor(private readonly store: AccountStore) {}

  /** Uses one call of `feature` for the caller, when the window has room. */
  async consume(p: Principal, rawFeature: unknown): Promise<QuotaView> {
    const caller = requireUser(p);
    const { feature, limit } = featureLimit(rawFeature);
    const windowStart = quotaWindowStart(Date.now());
    const resetAt = new Date(windowStart.getTime() + QUOTA_WINDOW_MS);
    const used = await this.store.consumeQuota({ userId: caller.userId, feature, windowStart, limit });
    if (used === undefined) return { allowed: false, limit, remaining: 0, resetAt };
    // The first call of a window: earlier windows are no longer needed.
    if (used === 1) await this.store.pruneQuota(caller.userId, feature, windowStart);
    return { allowed: true, limit, remaining: Math.max(0, limit - used), resetAt };
  }
}
