import {
  type GuardrailSettings,
  type Verdict,
  enforcementOf,
  evaluateGuardrails,
  gasCostOf,
} from '@custos/guardrails';
import type { AgentFields } from '@custos/proto/custos/identity/v1/agents';

/** A past transaction as the replay reads it: amounts in the chain's smallest units. */
export interface ReplayTx {
  id: string;
  createdAt: Date;
  chainName: string;
  chainId: bigint;
  /** Decimals of the chain's native unit. */
  decimals: number;
  to: string | null;
  value: bigint;
  gasLimit?: bigint;
  maxFeePerGas?: bigint;
}

/** A transaction the draft would have denied, with why. */
export interface ReplayDenial {
  tx: ReplayTx;
  verdicts: Verdict[];
}

/** The guardrail fields of a draft, by their API name (what `cleared_fields` names). */
const CLEARED: Record<string, keyof GuardrailSettings> = {
  tx_max_value_eth: 'txMaxValueEth',
  tx_daily_limit_eth: 'txDailyLimitEth',
  tx_max_per_day: 'txMaxPerDay',
  max_fee_per_gas_gwei: 'maxFeePerGasGwei',
  max_gas_limit: 'maxGasLimit',
};

/**
 * The agent's guardrails with a draft's guardrail fields applied over them, as a PATCH would:
 * absent fields keep the agent's value, `cleared_fields` unset the nullable limits. Fields of the
 * draft that are not guardrails are ignored.
 */
export function draftSettings(current: GuardrailSettings, draft: AgentFields | undefined): GuardrailSettings {
  if (!draft) return { ...current };
  const s: GuardrailSettings = { ...current };
  if (draft.executionGuardrails) s.executionGuardrails = draft.executionGuardrails;
  if (draft.perChainGuardrails) s.perChainGuardrails = draft.perChainGuardrails.chains;
  if (draft.txMaxValueEth !== undefined) s.txMaxValueEth = draft.txMaxValueEth;
  if (draft.txDailyLimitEth !== undefined) s.txDailyLimitEth = draft.txDailyLimitEth;
  if (draft.txMaxPerDay !== undefined) s.txMaxPerDay = draft.txMaxPerDay;
  if (draft.maxFeePerGasGwei !== undefined) s.maxFeePerGasGwei = draft.maxFeePerGasGwei;
  if (draft.maxGasLimit !== undefined) s.maxGasLimit = draft.maxGasLimit;
  if (draft.txToAllowlist) s.txToAllowlist = draft.txToAllowlist.values;
  if (draft.txAllowedChains) s.txAllowedChains = draft.txAllowedChains.values;
  if (draft.eip712DomainAllowlist) s.eip712DomainAllowlist = draft.eip712DomainAllowlist.values;
  if (draft.eip712DefaultPolicy !== undefined) s.eip712DefaultPolicy = draft.eip712DefaultPolicy;
  for (const f of draft.clearedFields) {
    const key = CLEARED[f];
    if (key) delete s[key];
  }
  return s;
}

/** The UTC calendar day of a time, `YYYY-MM-DD`: the guardrails' day. */
const utcDay = (d: Date) => d.toISOString().slice(0, 10);

/**
 * What `settings` would have done to `txs` (oldest first): each is judged against the totals of its
 * chain and UTC day that the settings would have admitted before it (`enforce` does not count a
 * denied one; `log` lets it through, so it counts, unless its verdict is refused in every mode).
 * Pure.
 */
export function replayGuardrails(settings: GuardrailSettings, txs: readonly ReplayTx[]): ReplayDenial[] {
  // `approve` holds a violating transaction until a human lets it through: like `enforce`, the
  // draft's day does not count it.
  const enforce = enforcementOf(settings) !== 'log';
  const totals = new Map<string, { spent: bigint; gasSpent: bigint; count: number }>();
  const denials: ReplayDenial[] = [];
  for (const tx of txs) {
    const key = `${tx.chainName}\u0000${utcDay(tx.createdAt)}`;
    const day = totals.get(key) ?? { spent: 0n, gasSpent: 0n, count: 0 };
    const amounts = {
      ...(tx.gasLimit !== undefined ? { gasLimit: tx.gasLimit } : {}),
      ...(tx.maxFeePerGas !== undefined ? { maxFeePerGas: tx.maxFeePerGas } : {}),
    };
    const verdicts = evaluateGuardrails(
      settings,
      {
        kind: 'transaction',
        chain: { name: tx.chainName, chainId: tx.chainId.toString(), decimals: tx.decimals },
        to: tx.to,
        value: tx.value,
        ...amounts,
      },
      day,
    );
    if (verdicts.length > 0) denials.push({ tx, verdicts });
    const admitted = verdicts.length === 0 || (!enforce && !verdicts.some((v) => v.always));
    if (admitted) {
      totals.set(key, {
        spent: day.spent + tx.value,
        gasSpent: day.gasSpent + (gasCostOf(amounts) ?? 0n),
        count: day.count + 1,
      });
    }
  }
  return denials;
}
