import type { ChainGuardrail } from '@custos/proto/custos/identity/v1/agents';
import { type GuardrailSettings, enforcementOf, toSmallest } from './evaluate.js';

/** How a guardrail edit moves the limits. */
export type GuardrailChange = 'same' | 'narrow' | 'widen' | 'mixed';

/** -1 stricter, 0 equal, 1 looser, 2 neither (sets that are not subsets of one another). */
type Step = -1 | 0 | 1 | 2;

class Unreadable extends Error {}

/** Precision of amounts when compared: finer than any chain's smallest unit. */
const COMPARE_DECIMALS = 36;

/** A cap: undefined is no limit (looser than any number). */
function compareCaps(a: bigint | undefined, b: bigint | undefined): Step {
  if (a === undefined && b === undefined) return 0;
  if (a === undefined) return -1;
  if (b === undefined) return 1;
  return b < a ? -1 : b > a ? 1 : 0;
}

function amount(v: string | undefined | null): bigint | undefined {
  if (v === undefined || v === null) return undefined;
  try {
    return toSmallest(String(v), COMPARE_DECIMALS, 'amount');
  } catch {
    throw new Unreadable();
  }
}

function int(v: string | undefined | null): bigint | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (!/^\d{1,30}$/.test(String(v))) throw new Unreadable();
  return BigInt(v);
}

function gwei(v: number | undefined | null): bigint | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new Unreadable();
  return amount(String(v));
}

const norm = (x: string) => (/^0x[0-9a-fA-F]{40}$/.test(x.trim()) ? x.trim().toLowerCase() : x.trim());

/** An allowed set: null is everything (an empty allowlist, or a default `allow`). */
function compareSets(a: Set<string> | null, b: Set<string> | null): Step {
  if (a === null && b === null) return 0;
  if (a === null) return -1;
  if (b === null) return 1;
  const bInA = [...b].every((x) => a.has(x));
  const aInB = [...a].every((x) => b.has(x));
  if (bInA && aInB) return 0;
  if (bInA) return -1;
  if (aInB) return 1;
  return 2;
}

function list(v: unknown): Set<string> | null {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw new Unreadable();
  return v.length ? new Set(v.map(norm)) : null;
}

function eip712Set(s: GuardrailSettings): Set<string> | null {
  const policy = s.eip712DefaultPolicy ?? '';
  if (policy === 'allow') return null;
  if (policy !== '' && policy !== 'deny') throw new Unreadable();
  return new Set((list(s.eip712DomainAllowlist) ?? new Set()).values());
}

function chainsOf(s: GuardrailSettings): Record<string, ChainGuardrail> {
  const c = s.perChainGuardrails ?? {};
  if (typeof c !== 'object' || Array.isArray(c)) throw new Unreadable();
  return c;
}

/**
 * How `after` changes `before`, limit by limit: `narrow` when every limit is equal or stricter and
 * one is stricter, `widen` when every limit is equal or looser and one is looser, `same` when all
 * are equal, `mixed` otherwise (or when either side cannot be read: such an edit is never taken
 * for a narrowing). A limit left unset is no limit; an empty allowlist allows everything;
 * `enforce` is stricter than `log`; `eip712_default_policy: allow` allows every domain, `deny`
 * only the allowlist's. Per-chain overrides are compared chain by chain (a chain absent on one
 * side has no override there). Pure.
 */
export function compareGuardrails(before: GuardrailSettings, after: GuardrailSettings): GuardrailChange {
  let steps: Step[];
  try {
    steps = stepsOf(before, after);
  } catch (err) {
    if (err instanceof Unreadable) return 'mixed';
    throw err;
  }
  const stricter = steps.includes(-1);
  const looser = steps.includes(1);
  if (steps.includes(2) || (stricter && looser)) return 'mixed';
  if (stricter) return 'narrow';
  if (looser) return 'widen';
  return 'same';
}

function stepsOf(a: GuardrailSettings, b: GuardrailSettings): Step[] {
  // log < approve (a human lets it through) < enforce.
  const enforce = (s: GuardrailSettings) => ({ log: 0, approve: 1, enforce: 2 })[enforcementOf(s)];
  const steps: Step[] = [
    (Math.sign(enforce(a) - enforce(b)) as Step) || 0,
    compareCaps(amount(a.txMaxValueEth), amount(b.txMaxValueEth)),
    compareCaps(amount(a.txDailyLimitEth), amount(b.txDailyLimitEth)),
    compareCaps(int(a.txMaxPerDay), int(b.txMaxPerDay)),
    compareCaps(gwei(a.maxFeePerGasGwei), gwei(b.maxFeePerGasGwei)),
    compareCaps(int(a.maxGasLimit), int(b.maxGasLimit)),
    compareSets(list(a.txToAllowlist), list(b.txToAllowlist)),
    compareSets(list(a.txAllowedChains), list(b.txAllowedChains)),
    compareSets(eip712Set(a), eip712Set(b)),
  ];
  const ca = chainsOf(a);
  const cb = chainsOf(b);
  for (const key of new Set([...Object.keys(ca), ...Object.keys(cb)])) {
    const x: ChainGuardrail = ca[key] ?? { toAllowlist: [] };
    const y: ChainGuardrail = cb[key] ?? { toAllowlist: [] };
    if (typeof x !== 'object' || x === null || typeof y !== 'object' || y === null) throw new Unreadable();
    steps.push(
      compareCaps(amount(x.maxValue), amount(y.maxValue)),
      compareCaps(amount(x.dailyLimit), amount(y.dailyLimit)),
      compareCaps(amount(x.gasDailyBudgetNative), amount(y.gasDailyBudgetNative)),
      compareSets(list(x.toAllowlist), list(y.toAllowlist)),
    );
  }
  return steps;
}
