import { pathMatches } from '@custos/auth';
import { conditionsHold } from './condition-fns.js';
import type { Decision, DecisionRequest, Grant } from './grant-types.js';

/** Whether a grant has not expired at `now`. */
export function isLive(g: Pick<Grant, 'expiresAt'>, now: Date): boolean {
  return g.expiresAt === null || g.expiresAt.getTime() > now.getTime();
}

/** Whether a grant speaks about this request: its principal, vault, permission, path, conditions, still live. */
export function grantApplies(g: Grant, r: DecisionRequest): boolean {
  return (
    g.principalType === r.principalType &&
    g.principalId === r.principalId &&
    g.vaultId === r.vaultId &&
    isLive(g, r.now) &&
    g.permissions.includes(r.permission) &&
    pathMatches(g.secretPathPattern, r.path) &&
    conditionsHold(g.conditions, { clientIp: r.clientIp, environment: r.environment, now: r.now })
  );
}

function older(a: Grant, b: Grant): boolean {
  const d = a.createdAt.getTime() - b.createdAt.getTime();
  return d < 0 || (d === 0 && a.id < b.id);
}

/**
 * Policy Engine v2: among the grants that apply, the highest priority wins; at equal priority a
 * deny beats an allow; no grant denies (`no_match`); a principal of another org than the vault's is
 * always denied (`other_org`). Among equals the oldest grant is named, so the answer is stable.
 */
export function decide(grants: readonly Grant[], r: DecisionRequest): Decision {
  if (r.principalOrgId !== r.vaultOrgId) {
    return { allowed: false, policyId: '', reason: 'other_org', cacheableForMs: MAX_CACHEABLE_MS };
  }
  const cacheable = cacheableForMs(grants, r.now);
  let winner: Grant | undefined;
  for (const g of grants) {
    if (!grantApplies(g, r)) continue;
    if (
      !winner ||
      g.priority > winner.priority ||
      (g.priority === winner.priority &&
        ((g.effect === 'deny' && winner.effect === 'allow') ||
          (g.effect === winner.effect && older(g, winner))))
    ) {
      winner = g;
    }
  }
  if (!winner) return { allowed: false, policyId: '', reason: 'no_match', cacheableForMs: cacheable };
  return {
    allowed: winner.effect === 'allow',
    policyId: winner.id,
    reason: winner.effect,
    cacheableForMs: cacheable,
  };
}

/** The longest a decision is declared cacheable: a day. */
export const MAX_CACHEABLE_MS = 86_400_000;

/**
 * How long a decision over these grants (the principal's grants on the vault) stays the answer to
 * the same question — same principal, environment, vault, path and permission — whatever the
 * client address and the clock: 0 when any of them has an IP or time-window condition (the answer
 * may differ for the next address or minute), else until the first of them expires (an expiry can
 * turn a deny into an allow as well as the reverse), at most MAX_CACHEABLE_MS. A grant change is
 * not foreseen here: callers drop cached answers when one happens (the decision generation).
 */
export function cacheableForMs(grants: readonly Grant[], now: Date): number {
  let ms = MAX_CACHEABLE_MS;
  for (const g of grants) {
    if (g.conditions.ipCidrs || g.conditions.timeWindow) return 0;
    if (g.expiresAt) ms = Math.min(ms, Math.max(0, g.expiresAt.getTime() - now.getTime()));
  }
  return ms;
}

/** The distinct patterns and vaults of a principal's live allow grants, in creation order. */
export function agentScopes(grants: readonly Grant[], now: Date): { scopes: string[]; vaultIds: string[] } {
  const live = grants
    .filter((g) => g.effect === 'allow' && isLive(g, now))
    .sort((a, b) => (older(a, b) ? -1 : older(b, a) ? 1 : 0));
  return {
    scopes: [...new Set(live.map((g) => g.secretPathPattern))],
    vaultIds: [...new Set(live.map((g) => g.vaultId))],
  };
}
