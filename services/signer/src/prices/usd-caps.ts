import { Interface } from 'ethers';
import { type Logger, PermissionDeniedError } from '@custos/service-kit';
import type { GuardrailLedger } from '../guardrails/guardrail-ledger.js';
import { GUARDRAIL_VIOLATION } from '../guardrails/guardrails.js';
import { USD_MICROS, usdDecimalOf, usdValueMicros } from './price-fns.js';
import type { PriceOracle } from './price-source.js';

/**
 * The ledger buckets of the money caps: rows of the guardrail ledger (per agent and UTC day) under
 * a name no chain can have (chain names are `[a-z0-9_-]`), whose `value_spent` is USD micros.
 */
export const USD_BUCKET = '$usd';
export const USDC_BUCKET = '$usdc';

/** The reason codes of the money caps (403 `guardrail_violation`, refused in every mode). */
export const USD_CAP_REASONS = {
  usd: 'usd_daily_limit_exceeded',
  usdc: 'usdc_daily_limit_exceeded',
} as const;

/** An agent's money caps, in USD micros; absent: no cap. */
export interface MoneyCaps {
  /** `usd_daily_limit_usd`: everything the agent spends in a UTC day, valued in USD, over all chains. */
  usd?: bigint;
  /** `usdc_daily_limit_usd`: USDC the agent moves in a UTC day. */
  usdc?: bigint;
}

/** What a transaction spends, as the caps value it. */
export interface Spend {
  orgId: string;
  agentId: string;
  chainName: string;
  /** The chain's native currency symbol (`ETH`, `BTC` …): the asset its value is priced as. */
  nativeCurrency: string;
  decimals: number;
  value: bigint;
  to: string | null;
  data: string;
}

const ERC20 = new Interface([
  'function transfer(address to, uint256 amount)',
  'function transferFrom(address from, address to, uint256 amount)',
  'function approve(address spender, uint256 amount)',
  'function increaseAllowance(address spender, uint256 addedValue)',
]);

/**
 * The USDC amount (6 decimals, so USD micros at face value) a call to one of the chain's USDC
 * contracts moves or lets another move: `transfer`, `transferFrom`, `approve`,
 * `increaseAllowance`; 0 for anything else.
 */
export function usdcMoved(
  spend: Pick<Spend, 'chainName' | 'to' | 'data'>,
  usdc: ReadonlyMap<string, string>,
): bigint {
  const contract = usdc.get(spend.chainName);
  if (!contract || !spend.to || spend.to.toLowerCase() !== contract) return 0n;
  try {
    const call = ERC20.parseTransaction({ data: spend.data });
    if (!call) return 0n;
    // An allowance lets the spender move the amount with its own transferFrom: it counts as moved.
    return BigInt(call.name === 'transferFrom' ? call.args[2] : call.args[1]);
  } catch {
    return 0n;
  }
}

/**
 * USD caps on the signing path (issue 20): the day's spend valued through the price oracle
 * (Chainlink feeds, else the static table; a stale or missing price is 503, never a guess) and
 * reserved in the guardrail ledger's row of the cap, under its lock, in the transaction that judges
 * it — parallel transactions cannot pass a cap together. A refusal is 403 `guardrail_violation`
 * whatever the enforcement mode: a cap in money is a cap.
 */
export class UsdCaps {
  constructor(
    private readonly deps: {
      ledger: Pick<GuardrailLedger, 'judge' | 'release'>;
      oracle: Pick<PriceOracle, 'price'>;
      /** USDC's contract per chain (USDC_CONTRACTS), lowercased. */
      usdc: ReadonlyMap<string, string>;
      logger: Logger;
    },
  ) {}

  /** The spend's USD value and USDC amount, in micros (prices asked only for what a cap needs). */
  async value(spend: Spend, caps: MoneyCaps): Promise<{ usd: bigint; usdc: bigint }> {
    const usdc = usdcMoved(spend, this.deps.usdc);
    if (caps.usd === undefined) return { usd: 0n, usdc };
    let usd = 0n;
    if (spend.value > 0n) {
      const p = await this.deps.oracle.price(spend.nativeCurrency);
      usd += usdValueMicros(spend.value, spend.decimals, p.micros);
    }
    if (usdc > 0n) usd += usdValueMicros(usdc, 6, (await this.deps.oracle.price('USDC')).micros);
    return { usd, usdc };
  }

  /**
   * Judges the spend against the caps and, when `reserve`, reserves it; returns the reservations to
   * give back if the transaction ends before it reaches the chain. Throws 403 when a cap would be
   * passed (nothing kept). Without `reserve` (a transaction about to wait for a human) nothing is
   * taken: it is judged again, and reserved, when it resumes.
   */
  async admit(spend: Spend, caps: MoneyCaps, reserve = true): Promise<string[]> {
    if (caps.usd === undefined && caps.usdc === undefined) return [];
    const v = await this.value(spend, caps);
    const checks = [
      {
        cap: caps.usdc,
        micros: v.usdc,
        bucket: USDC_BUCKET,
        reason: USD_CAP_REASONS.usdc,
        field: 'usdc_daily_limit_usd',
      },
      {
        cap: caps.usd,
        micros: v.usd,
        bucket: USD_BUCKET,
        reason: USD_CAP_REASONS.usd,
        field: 'usd_daily_limit_usd',
      },
    ];
    const taken: string[] = [];
    try {
      for (const c of checks) {
        if (c.cap === undefined || c.micros === 0n) continue;
        taken.push(...(await this.judge(spend, c.bucket, c.micros, c.cap, c.reason, c.field, reserve)));
      }
    } catch (err) {
      await this.release(taken, 'a money cap refused the transaction');
      throw err;
    }
    return taken;
  }

  /** One cap's bucket: locked, judged, and the spend added when admitted and `reserve`. */
  private async judge(
    spend: Spend,
    bucket: string,
    micros: bigint,
    cap: bigint,
    reason: string,
    field: string,
    reserve: boolean,
  ): Promise<string[]> {
    const { result, reservationId } = await this.deps.ledger.judge(
      { orgId: spend.orgId, agentId: spend.agentId, chainName: bucket, family: 'usd' },
      reserve ? { value: micros, gas: 0n, kind: 'transaction' } : undefined,
      async (totals) => {
        const admitted = totals.spent + micros <= cap;
        return { admit: admitted, result: { spent: totals.spent, admitted } };
      },
    );
    if (result.admitted) return reservationId ? [reservationId] : [];
    throw new PermissionDeniedError(
      `guardrail: ${field} is ${usdDecimalOf(cap)} USD a UTC day; ${usdDecimalOf(result.spent)} is spent today and this would add ${usdDecimalOf(micros)}`,
      { type: GUARDRAIL_VIOLATION, field, extensions: { reason_code: reason } },
    );
  }

  /** Gives reservations back (a transaction that ended before the chain); failures are logged. */
  async release(ids: readonly string[], why: string): Promise<void> {
    for (const id of ids) {
      try {
        await this.deps.ledger.release(id);
      } catch (err) {
        this.deps.logger.error(
          { err: String(err), reservation_id: id, why },
          'a money-cap reservation could not be given back',
        );
      }
    }
  }
}

/** A cap setting in USD (a JSON number) in micros; undefined when unset. */
export function capMicros(usd: number | null | undefined): bigint | undefined {
  if (usd === null || usd === undefined || !Number.isFinite(usd) || usd < 0) return undefined;
  return BigInt(Math.round(usd * Number(USD_MICROS)));
}
