import { and, desc, eq, gte, inArray, isNotNull, or } from 'drizzle-orm';
import { type Principal, requireHumanAdmin } from '@custos/auth';
import type { AgentFields } from '@custos/proto/custos/identity/v1/agents';
import { type Database, InvalidArgumentError } from '@custos/service-kit';
import { FAMILY_DEFAULTS } from '../chains/chain-fns.js';
import type { ChainService } from '../chains/chain-service.js';
import type { ChainFamily } from '../chains/chain-types.js';
import { transactions } from '../db/schema.js';
import { agentIdOf } from '../keys/key-fns.js';
import type { IdentityClient } from '../peers/identity-client.js';
import { enforcementOf } from '@custos/guardrails';
import { type ReplayDenial, type ReplayTx, draftSettings, replayGuardrails } from './replay-fns.js';

/** The most days a replay looks back. */
export const MAX_REPLAY_DAYS = 90;
/** The most transactions one replay evaluates (the newest; older ones are left out and flagged). */
export const MAX_REPLAY_TRANSACTIONS = 10_000;

/** Rows that reached a signature: what the agent really did (held, refused-before-signing rows did not). */
const SIGNED = ['signed', 'sign_only', 'broadcast', 'confirmed'];

/** A replay's answer. */
export interface ReplayReport {
  since: Date;
  evaluated: number;
  denials: ReplayDenial[];
  enforcement: 'log' | 'approve' | 'enforce';
  truncated: boolean;
}

/**
 * `POST /v1/agents/{id}/guardrails/replay` (SPEC §4.4): a draft of an agent's guardrails judged
 * against the agent's signed transactions of the last `days` days. Read-only: one SELECT; no
 * ledger, audit or transaction row is written. Owners and admins of the agent's org.
 */
export class GuardrailReplay {
  constructor(
    private readonly deps: {
      db: Database;
      chains: Pick<ChainService, 'resolve'>;
      identity: Pick<IdentityClient, 'agentInOrg'>;
      clock?: () => Date;
    },
  ) {}

  async replay(
    p: Principal,
    rawAgentId: string,
    days: number,
    draft: AgentFields | undefined,
  ): Promise<ReplayReport> {
    requireHumanAdmin(p, "replay an agent's guardrails");
    const agentId = agentIdOf(rawAgentId);
    if (!Number.isInteger(days) || days < 1 || days > MAX_REPLAY_DAYS)
      throw new InvalidArgumentError('days', `days must be an integer from 1 to ${MAX_REPLAY_DAYS}`);
    const agent = await this.deps.identity.agentInOrg(p.orgId, agentId);
    const settings = draftSettings(agent, draft);
    const since = new Date((this.deps.clock?.() ?? new Date()).getTime() - days * 86_400_000);
    const rows = await this.deps.db
      .select({
        id: transactions.id,
        createdAt: transactions.createdAt,
        chainName: transactions.chainName,
        chainId: transactions.chainId,
        family: transactions.family,
        to: transactions.toAddress,
        value: transactions.valueWei,
        gasLimit: transactions.gasLimit,
        maxFeePerGas: transactions.maxFeePerGas,
        gasPrice: transactions.gasPrice,
      })
      .from(transactions)
      .where(
        and(
          eq(transactions.orgId, p.orgId),
          eq(transactions.agentId, agentId),
          gte(transactions.createdAt, since),
          or(
            inArray(transactions.status, SIGNED),
            and(eq(transactions.status, 'failed'), isNotNull(transactions.broadcastAt)),
          ),
        ),
      )
      .orderBy(desc(transactions.createdAt), desc(transactions.id))
      .limit(MAX_REPLAY_TRANSACTIONS + 1);
    const truncated = rows.length > MAX_REPLAY_TRANSACTIONS;
    const kept = rows.slice(0, MAX_REPLAY_TRANSACTIONS).reverse();
    const decimals = new Map<string, number>();
    const txs: ReplayTx[] = [];
    for (const r of kept) {
      if (!decimals.has(r.chainName)) decimals.set(r.chainName, await this.decimalsOf(r.chainName, r.family));
      const fee = r.maxFeePerGas ?? r.gasPrice;
      txs.push({
        id: r.id,
        createdAt: r.createdAt,
        chainName: r.chainName,
        chainId: r.chainId,
        decimals: decimals.get(r.chainName)!,
        to: r.to,
        value: BigInt(r.value),
        ...(r.gasLimit !== null ? { gasLimit: BigInt(r.gasLimit) } : {}),
        ...(fee !== null ? { maxFeePerGas: BigInt(fee) } : {}),
      });
    }
    return {
      since,
      evaluated: txs.length,
      denials: replayGuardrails(settings, txs),
      enforcement: enforcementOf(settings),
      truncated,
    };
  }

  /** The chain's native decimals as registered now; the family's default for a chain since removed. */
  private async decimalsOf(chainName: string, family: string): Promise<number> {
    try {
      return (await this.deps.chains.resolve(chainName, 'chain', true)).nativeDecimals;
    } catch {
      return FAMILY_DEFAULTS[family as ChainFamily]?.decimals ?? 18;
    }
  }
}
