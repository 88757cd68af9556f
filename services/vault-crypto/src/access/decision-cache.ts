import { ExpiringLru } from '@custos/service-kit';
import { policyGenerationKey } from '@custos/service-kit/redis-acl';

/** The part of a Redis client the cache reads. */
export interface GenerationReader {
  get(key: string): Promise<string | null>;
}

/** Settings of the decision cache (POLICY_DECISION_CACHE_TTL_MS, POLICY_DECISION_CACHE_SIZE). */
export interface DecisionCacheOptions {
  ttlMs: number;
  size: number;
}

interface CachedDecision {
  allowed: boolean;
  generation: string;
}

/**
 * Policy decisions this replica already asked for (ARCHITECTURE §1: the policy hop behind a
 * decision cache). Bounded (LRU of `size`), and an answer is reused only:
 * - while the org's decision generation in Redis is the one it was fetched under: the policy
 *   service bumps it after committing any change to the org's grants, before it answers the
 *   change, so a removed grant or an added deny counts from the next operation on every replica;
 * - for at most `ttlMs`, and never longer than policy declared the answer stable (`cacheable_for_ms`:
 *   0 when an IP or time-window condition could apply, else until the first grant in play expires);
 *   `ttlMs` is also the stale-allow window left if a generation bump failed after a commit.
 * The generation is read before policy is asked, so an answer that raced a change is stamped with
 * the generation from before it and is never reused. When Redis cannot say, the cache is skipped
 * (policy is asked), never trusted.
 */
export class DecisionCache {
  private readonly entries: ExpiringLru<CachedDecision>;

  constructor(
    private readonly redis: GenerationReader,
    private readonly opts: DecisionCacheOptions,
    private readonly now: () => number = Date.now,
  ) {
    this.entries = new ExpiringLru(opts.size);
  }

  /** Whether answers are kept at all. */
  get enabled(): boolean {
    return this.opts.ttlMs > 0 && this.opts.size > 0;
  }

  /** The org's current decision generation, or undefined when Redis cannot say (skip the cache). */
  async generation(orgId: string): Promise<string | undefined> {
    try {
      return (await this.redis.get(policyGenerationKey(orgId))) ?? '0';
    } catch {
      return undefined;
    }
  }

  /** A cached answer to `question` fetched under `generation`, if there is one. */
  get(question: string, generation: string): boolean | undefined {
    const hit = this.entries.get(question, this.now());
    if (!hit) return undefined;
    if (hit.generation !== generation) {
      this.entries.delete(question);
      return undefined;
    }
    return hit.allowed;
  }

  /** When a question is asked: the lifetime of its answer counts from here. */
  clock(): number {
    return this.now();
  }

  /**
   * Keeps policy's answer, fetched under `generation`, for as long as both sides allow, counted
   * from `askedAt` (before the question left, so a declared stability is never overshot).
   */
  set(
    question: string,
    generation: string,
    allowed: boolean,
    cacheableForMs: number,
    askedAt = this.now(),
  ): void {
    const ms = Math.min(this.opts.ttlMs, cacheableForMs);
    if (!this.enabled || ms <= 0) return;
    this.entries.set(question, { allowed, generation }, askedAt + ms);
  }
}
