import { InvalidArgumentError } from '@custos/service-kit';

/** Lifetime of a token minted from a router key (SPEC.md §5.4, §8): exactly 60 seconds. */
export const ROUTER_KEY_TOKEN_TTL_SECONDS = 60;

/** The optional limits of a new router key; null means no limit. */
export interface RouterKeyLimits {
  maxConcurrentStreams: number | null;
  spendCapMicroUsd: number | null;
}

const FIELDS = {
  max_concurrent_streams: 2 ** 31 - 1,
  spend_cap_micro_usd: Number.MAX_SAFE_INTEGER,
} as const;

/**
 * Validates the body of `POST /v1/agents/{agent_id}/router-keys`: both fields optional, each a
 * non-negative integer or null (no limit); unknown fields are refused so a typo never passes.
 */
export function parseRouterKeyLimits(fields: Record<string, unknown>): RouterKeyLimits {
  for (const name of Object.keys(fields)) {
    if (!Object.hasOwn(FIELDS, name))
      throw new InvalidArgumentError(name, `${name} is not a router key field`);
  }
  const read = (name: keyof typeof FIELDS): number | null => {
    const v = fields[name];
    if (v === undefined || v === null) return null;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > FIELDS[name]) {
      throw new InvalidArgumentError(
        name,
        `${name} must be a non-negative integer (at most ${FIELDS[name]})`,
      );
    }
    return v;
  };
  return {
    maxConcurrentStreams: read('max_concurrent_streams'),
    spendCapMicroUsd: read('spend_cap_micro_usd'),
  };
}
