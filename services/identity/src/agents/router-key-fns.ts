import { InvalidArgumentError } from '@custos/service-kit';
import type { RouterKeyLimits } from './router-key-types.js';

/** Lifetime of a token minted from a router key (SPEC.md §5.4, §8): exactly 60 seconds. */
export const ROUTER_KEY_TOKEN_TTL_SECONDS = 60;

const MAX = {
  maxConcurrentStreams: ['max_concurrent_streams', 2 ** 31 - 1],
  spendCapMicroUsd: ['spend_cap_micro_usd', Number.MAX_SAFE_INTEGER],
} as const;

/**
 * The limits of a new router key, checked again whoever sends them: each absent (no limit) or a
 * non-negative integer within its bound; a refusal names the field.
 */
export function checkRouterKeyLimits(limits: RouterKeyLimits): RouterKeyLimits {
  for (const key of Object.keys(MAX) as Array<keyof RouterKeyLimits>) {
    const v = limits[key];
    const [field, max] = MAX[key];
    if (v !== null && (!Number.isInteger(v) || v < 0 || v > max)) {
      throw new InvalidArgumentError(field, `${field} must be a non-negative integer (at most ${max})`);
    }
  }
  return limits;
}
