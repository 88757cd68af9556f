import type { RuleMatch } from '@custos/approval-rules';
import { auditOf } from '@custos/events';
import {
  type GuardrailRequest,
  type TypedDataRequest,
  type Verdict,
  ZERO_TOTALS,
  enforcementOf,
  evaluateGuardrails,
  gasCostOf,
} from '@custos/guardrails';
import { type Database, type Logger, PermissionDeniedError, type Transaction } from '@custos/service-kit';
import { failClosed, writeSignerAudit } from '../audit/signer-audit.js';
import type { IntentScope } from '../intents/intent-context.js';
import { GuardrailLedger } from './guardrail-ledger.js';
import { type MoneyCaps, type UsdCaps, capMicros } from '../prices/usd-caps.js';

/** The problem type of an enforced guardrail (SPEC §7). */
export const GUARDRAIL_VIOLATION = 'guardrail_violation';
/** The audit action of a violation let through in `log` mode (SPEC §6). */
export const WOULD_DENY = 'guardrail_shadow.would_deny';

/** What a transaction would move, in the chain's smallest units (value; EVM gas and fee). */
export interface TxAmounts {
  to: string | null;
  value: bigint;
  /** EVM call data (a USDC transfer counts towards the money caps); absent: none. */
  data?: string;
  gasLimit?: bigint;
  maxFeePerGas?: bigint;
}

/** An admitted transaction's hold on the day's totals; `release` gives it back (once). */
export interface Admission {
  reservationId: string | undefined;
  verdicts: Verdict[];
  /** The money caps' reservations (USD and USDC buckets), given back with the rest. */
  money?: string[];
}

/** The 403 of refused verdicts: the first names the field and reason_code; all codes are listed. */
export function guardrailViolation(verdicts: Verdict[]): PermissionDeniedError {
  const first = verdicts[0]!;
  return new PermissionDeniedError(`guardrail: ${first.detail}`, {
    type: GUARDRAIL_VIOLATION,
    field: first.field,
    extensions: {
      reason_code: first.reasonCode,
      ...(verdicts.length > 1 ? { reason_codes: verdicts.map((v) => v.reasonCode).join(',') } : {}),
    },
  });
}

/**
 * The agent's guardrails on the signing path (issue 20), judged by @custos/guardrails' evaluator
 * against the day's running totals before anything is signed or a nonce taken. A violation is
 * refused (403 `guardrail_violation`) when the agent's `execution_guardrails.enforcement` is
 * `enforce` or the verdict is refused in any mode (malformed settings, a typed-data domain of
 * another chain); in `log` mode the request goes on and each violation is recorded
 * `guardrail_shadow.would_deny` (its reason_code, the setting, the chain; never the request's
 * content) in the transaction that reserves the request's amounts.
 */
export class Guardrails {
  readonly ledger: GuardrailLedger;

  constructor(
    private readonly deps: {
      db: Database;
      logger: Logger;
      /** The money caps (usd_daily_limit_usd, usdc_daily_limit_usd); absent: not judged here. */
      money?: UsdCaps;
    },
  ) {
    this.ledger = new GuardrailLedger(deps.db);
  }

  /**
   * Judges a transaction (submitted, or signed only) and, when admitted and `reserve`, adds it to
   * the day's totals. Throws the 403 when refused. `reserve: false` judges against the totals
   * without taking anything and without records (a transaction about to wait for a human: it is
   * judged again, and reserved, when it resumes).
   */
  async admitTransaction(
    scope: IntentScope,
    t: TxAmounts,
    o: {
      kind: 'transaction' | 'sign_only';
      reserve: boolean;
      /**
       * The reason codes a human approved when the transaction was held (under `approve`): those
       * violations are let through on resume (without a shadow record); any other refuses as under
       * `enforce` (gas and fee, or a day that grew while it waited, were not in the approval).
       */
      approvedCodes?: readonly string[];
      /** Judging a transaction about to be held for a human: under `approve` violations do not refuse. */
      holding?: boolean;
    },
  ): Promise<Admission> {
    const request = transactionRequest(scope, t);
    const mode = enforcementOf(scope.settings);
    const approved = new Set(o.approvedCodes ?? []);
    const refuses = (v: readonly Verdict[]) =>
      v.length > 0 &&
      (mode === 'enforce' ||
        v.some((x) => x.always) ||
        (mode === 'approve' && !o.holding && !v.every((x) => approved.has(x.reasonCode))));
    const { result: verdicts, reservationId } = await failClosed(this.deps.logger, WOULD_DENY, () =>
      this.ledger.judge(
        {
          orgId: scope.agent.orgId,
          agentId: scope.agent.agentId,
          chainName: scope.chain.name,
          family: scope.chain.family,
        },
        o.reserve ? { value: t.value, gas: gasCostOf(t) ?? 0n, kind: o.kind } : undefined,
        async (totals, tx) => {
          const v = evaluateGuardrails(scope.settings, request, totals);
          const refused = refuses(v);
          if (!refused && v.length && o.reserve && mode === 'log') await this.wouldDeny(tx, scope, v, o.kind);
          return { admit: !refused, result: v };
        },
      ),
    );
    if (refuses(verdicts)) throw guardrailViolation(verdicts);
    const admission: Admission = { reservationId, verdicts };
    // The money caps, judged on the same request after the chain's own limits: a refusal gives the
    // chain's reservation back. Caps in money refuse in every mode (docs/guardrails.md).
    const usd = capMicros(scope.settings.usdDailyLimitUsd);
    const usdc = capMicros(scope.settings.usdcDailyLimitUsd);
    const caps: MoneyCaps = {
      ...(usd !== undefined ? { usd } : {}),
      ...(usdc !== undefined ? { usdc } : {}),
    };
    if (this.deps.money && (caps.usd !== undefined || caps.usdc !== undefined)) {
      try {
        admission.money = await this.deps.money.admit(
          {
            orgId: scope.agent.orgId,
            agentId: scope.agent.agentId,
            chainName: scope.chain.name,
            nativeCurrency: scope.chain.nativeCurrency,
            decimals: scope.chain.nativeDecimals,
            value: t.value,
            to: t.to,
            data: t.data ?? '0x',
          },
          caps,
          o.reserve,
        );
      } catch (err) {
        await this.release(admission, 'a money cap refused the transaction');
        throw err;
      }
    }
    return admission;
  }

  /**
   * The violations a transaction would have now, against the day's totals, nothing reserved or
   * recorded: under `approve`, whether it must wait for a human. A violation refused in every mode
   * (`always`) throws the 403.
   */
  async violations(scope: IntentScope, t: TxAmounts): Promise<Verdict[]> {
    const request = transactionRequest(scope, t);
    const { result } = await this.ledger.judge(ledgerKeyOf(scope), undefined, async (totals) => ({
      admit: false,
      result: evaluateGuardrails(scope.settings, request, totals),
    }));
    if (result.some((v) => v.always)) throw guardrailViolation(result);
    return result;
  }

  /** Judges an EIP-712 document's domain (nothing to reserve); throws the 403 when refused. */
  async judgeTypedData(scope: IntentScope, domain: TypedDataRequest['domain']): Promise<Verdict[]> {
    const v = evaluateGuardrails(
      scope.settings,
      { kind: 'typed_data', chain: chainOf(scope), domain },
      ZERO_TOTALS,
    );
    if (!v.length) return v;
    // `approve` holds transactions only: a typed-data document it would hold is refused as under `enforce`.
    if (enforcementOf(scope.settings) !== 'log' || v.some((x) => x.always)) throw guardrailViolation(v);
    await failClosed(this.deps.logger, WOULD_DENY, () =>
      this.deps.db.transaction((tx) => this.wouldDeny(tx, scope, v, 'typed_data')),
    );
    return v;
  }

  /** Gives an admitted transaction's reservation back; a failure is logged (the day's cap stays the stricter). */
  async release(a: Admission | undefined, why: string): Promise<void> {
    if (a?.money?.length) await this.deps.money?.release(a.money, why);
    if (!a?.reservationId) return;
    try {
      await this.ledger.release(a.reservationId);
    } catch (err) {
      this.deps.logger.error(
        { err: String(err), reservation_id: a.reservationId, why },
        'a guardrail reservation could not be given back',
      );
    }
  }

  /** One `guardrail_shadow.would_deny` record per violation, so the shadow report counts each reason. */
  private async wouldDeny(
    tx: Transaction,
    scope: IntentScope,
    verdicts: Verdict[],
    intent: string,
  ): Promise<void> {
    for (const v of verdicts) {
      await writeSignerAudit(
        tx,
        auditOf(
          scope.agent,
          WOULD_DENY,
          { type: 'agent', id: scope.agent.agentId },
          {
            reason_code: v.reasonCode,
            field: v.field,
            detail: v.detail,
            intent,
            chain: scope.chain.name,
            enforcement: 'log',
          },
        ),
      );
    }
  }
}

/**
 * The approval match a transaction is held with when its guardrails are in `approve` mode and it
 * violates them: tier 2 (a step-up), one human decision; the approver's preview names the
 * violated guardrails as the deciding rule.
 */
export function guardrailApprovalMatch(verdicts: readonly Verdict[]): RuleMatch {
  return {
    tier: 2,
    ruleIndex: -1,
    rule: { conditions: [], riskTier: 2, skipWhen: [], requireWhen: [] },
    ruleJson: {
      reason: 'guardrail_violation',
      violations: verdicts.map((v) => ({ reason_code: v.reasonCode, field: v.field, detail: v.detail })),
      risk_tier: 2,
    },
  };
}

/** A transaction as the evaluator reads it. */
function transactionRequest(scope: IntentScope, t: TxAmounts): GuardrailRequest {
  return {
    kind: 'transaction',
    chain: chainOf(scope),
    to: t.to,
    value: t.value,
    ...(t.gasLimit !== undefined ? { gasLimit: t.gasLimit } : {}),
    ...(t.maxFeePerGas !== undefined ? { maxFeePerGas: t.maxFeePerGas } : {}),
  };
}

/** The agent's ledger row of the request's chain. */
function ledgerKeyOf(scope: IntentScope) {
  return {
    orgId: scope.agent.orgId,
    agentId: scope.agent.agentId,
    chainName: scope.chain.name,
    family: scope.chain.family,
  };
}

function chainOf(scope: IntentScope) {
  return {
    name: scope.chain.name,
    chainId: scope.chain.chainId.toString(),
    decimals: scope.chain.nativeDecimals,
  };
}
