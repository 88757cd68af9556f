import { and, eq, inArray, notLike, sql } from 'drizzle-orm';
import type { Principal } from '@custos/auth';
import { type Database, InvalidArgumentError, isUuid } from '@custos/service-kit';
import { FAMILY_DEFAULTS } from '../chains/chain-fns.js';
import type { ChainService } from '../chains/chain-service.js';
import type { ChainFamily } from '../chains/chain-types.js';
import { guardrailLedger } from '../db/schema.js';

/** The most agents one ListSpendToday names (a page of the agent list). */
export const MAX_SPEND_AGENTS = 1000;

/** One agent's UTC day so far. */
export interface SpendToday {
  agentId: string;
  /** Native value by chain family, in the family's major units (decimal strings). */
  spentByFamily: Record<string, string>;
  count: number;
}

/** `v` smallest units of `decimals` as a decimal string of major units, without trailing zeros. */
export function majorUnits(v: bigint, decimals: number): string {
  if (decimals === 0) return v.toString();
  const s = v.toString().padStart(decimals + 1, '0');
  const whole = s.slice(0, -decimals);
  const frac = s.slice(-decimals).replace(/0+$/, '');
  return frac ? `${whole}.${frac}` : whole;
}

/**
 * Sums per-chain amounts (each in its chain's smallest unit and decimals) into one family total in
 * major units: amounts are brought to the largest decimals among them first, so nothing is lost.
 */
export function familyTotal(parts: ReadonlyArray<{ value: bigint; decimals: number }>): string {
  const d = Math.max(0, ...parts.map((p) => p.decimals));
  const sum = parts.reduce((acc, p) => acc + p.value * 10n ** BigInt(d - p.decimals), 0n);
  return majorUnits(sum, d);
}

/**
 * The agent record's `tx_spent_today_by_chain` and `tx_count_today` (the reference's fields): the
 * guardrail ledger's rows of the current UTC day for agents of the caller's org, chains grouped by
 * family. The money caps' rows (`$usd`, `$usdc`) are not spend by chain and are left out. An agent
 * sees only its own day.
 */
export class SpendTodayReader {
  constructor(private readonly deps: { db: Database; chains: Pick<ChainService, 'resolve'> }) {}

  async list(p: Principal, agentIds: readonly string[]): Promise<SpendToday[]> {
    if (agentIds.length > MAX_SPEND_AGENTS)
      throw new InvalidArgumentError('agent_ids', `agent_ids may name at most ${MAX_SPEND_AGENTS} agents`);
    let ids = [...new Set(agentIds.filter(isUuid).map((id) => id.toLowerCase()))];
    if (p.kind === 'agent') ids = ids.filter((id) => id === p.agentId);
    if (ids.length === 0) return [];
    const rows = await this.deps.db
      .select()
      .from(guardrailLedger)
      .where(
        and(
          eq(guardrailLedger.orgId, p.orgId),
          inArray(guardrailLedger.agentId, ids),
          eq(guardrailLedger.day, sql`to_char(now() at time zone 'UTC', 'YYYY-MM-DD')`),
          notLike(guardrailLedger.chainName, '$%'),
        ),
      );
    const decimals = new Map<string, number>();
    const byAgent = new Map<
      string,
      { parts: Map<string, Array<{ value: bigint; decimals: number }>>; count: number }
    >();
    for (const r of rows) {
      if (!decimals.has(r.chainName)) decimals.set(r.chainName, await this.decimalsOf(r.chainName, r.family));
      const a = byAgent.get(r.agentId) ?? { parts: new Map(), count: 0 };
      const parts = a.parts.get(r.family) ?? [];
      parts.push({ value: BigInt(r.valueSpent), decimals: decimals.get(r.chainName)! });
      a.parts.set(r.family, parts);
      a.count += r.txCount;
      byAgent.set(r.agentId, a);
    }
    return [...byAgent].map(([agentId, a]) => ({
      agentId,
      spentByFamily: Object.fromEntries([...a.parts].map(([family, parts]) => [family, familyTotal(parts)])),
      count: a.count,
    }));
  }

  private async decimalsOf(chainName: string, family: string): Promise<number> {
    try {
      return (await this.deps.chains.resolve(chainName, 'chain', true)).nativeDecimals;
    } catch {
      return FAMILY_DEFAULTS[family as ChainFamily]?.decimals ?? 18;
    }
  }
}
