import type { Agent, ChainGuardrail } from '@custos/proto/custos/identity/v1/agents';

/**
 * An agent's guardrail settings as identity's Agent carries them (SPEC §2.4, DECISIONS.md): the
 * fields the evaluator reads. Amounts are decimal strings in the chain's native major unit.
 */
export type GuardrailSettings = Partial<
  Pick<
    Agent,
    | 'executionGuardrails'
    | 'perChainGuardrails'
    | 'txMaxValueEth'
    | 'txDailyLimitEth'
    | 'txMaxPerDay'
    | 'maxFeePerGasGwei'
    | 'maxGasLimit'
    | 'txToAllowlist'
    | 'txAllowedChains'
    | 'eip712DomainAllowlist'
    | 'eip712DefaultPolicy'
  >
>;

/** The chain a request is on. */
export interface GuardrailChain {
  /** The registry name (`ethereum`, `anvil`, …): the key of `per_chain_guardrails`. */
  name: string;
  /** The numeric chain id (decimal string); `tx_allowed_chains` may name it instead of the name. */
  chainId: string;
  /** Decimals of the chain's native unit (18 on EVM): major units → smallest units. */
  decimals: number;
}

/** A transaction (submitted or signed only), its amounts in the chain's smallest units. */
export interface TransactionRequest {
  kind: 'transaction';
  chain: GuardrailChain;
  /** Destination; null for a contract creation. */
  to: string | null;
  /** Native value in the smallest unit (wei). */
  value: bigint;
  /** EVM only: the gas limit. */
  gasLimit?: bigint;
  /** EVM only: max fee per gas (type 2) or gas price (legacy), in wei. */
  maxFeePerGas?: bigint;
}

/** An EIP-712 signature request: the document's domain. */
export interface TypedDataRequest {
  kind: 'typed_data';
  chain: GuardrailChain;
  domain: { name?: string; version?: string; chainId?: string; verifyingContract?: string };
}

export type GuardrailRequest = TransactionRequest | TypedDataRequest;

/** The agent's running totals on the request's chain for the current UTC day, before this request. */
export interface GuardrailTotals {
  /** Native value reserved today, smallest units. */
  spent: bigint;
  /** Gas budget reserved today (Σ gas_limit × max_fee_per_gas), smallest units. */
  gasSpent: bigint;
  /** Transactions reserved today. */
  count: number;
}

export const ZERO_TOTALS: GuardrailTotals = { spent: 0n, gasSpent: 0n, count: 0 };

/**
 * Stable reason codes of guardrail verdicts (docs/guardrails.md lists them). `settings_invalid`
 * and `eip712_domain_chain_mismatch` are refused whatever the enforcement mode (`always`).
 */
export const REASON_CODES = [
  'settings_invalid',
  'chain_not_allowed',
  'to_not_allowed',
  'tx_max_value_exceeded',
  'tx_daily_limit_exceeded',
  'tx_max_per_day_exceeded',
  'max_fee_per_gas_exceeded',
  'max_gas_limit_exceeded',
  'gas_daily_budget_exceeded',
  'eip712_domain_not_allowed',
  'eip712_domain_chain_mismatch',
] as const;
export type ReasonCode = (typeof REASON_CODES)[number];

/** One violated guardrail. */
export interface Verdict {
  reasonCode: ReasonCode;
  /** The setting at fault as the API names it (`tx_daily_limit`, `per_chain_guardrails.base.max_value`, …). */
  field: string;
  /** What was asked against what is allowed, for a human; never a secret. */
  detail: string;
  /** Refused in `log` mode as well: malformed settings fail closed, a wrong domain chain is never signed. */
  always: boolean;
}

/**
 * `log` (default: violations are recorded, the request goes on), `approve` (a violating transaction
 * waits for a human) or `enforce` (refused). Anything else reads as `enforce` (fail closed).
 */
export function enforcementOf(s: GuardrailSettings): 'log' | 'approve' | 'enforce' {
  const m = s.executionGuardrails?.enforcement;
  return m === undefined || m === '' || m === 'log' ? 'log' : m === 'approve' ? 'approve' : 'enforce';
}

class Malformed extends Error {
  constructor(readonly field: string) {
    super(field);
  }
}

const DECIMAL = /^(\d+)(?:\.(\d*))?(?:[eE]([+-]?\d{1,3}))?$/;

/**
 * A non-negative decimal string (as the gateway stores amounts, `String(number)` included, so
 * `1e-7` too) in smallest units of `decimals`. Digits below the smallest unit are dropped (the
 * cap rounds down, the strict side). Anything else throws Malformed(field).
 */
export function toSmallest(v: string, decimals: number, field: string): bigint {
  const m = DECIMAL.exec(v.trim());
  if (!m || !Number.isInteger(decimals) || decimals < 0 || decimals > 36) throw new Malformed(field);
  const digits = (m[1] ?? '') + (m[2] ?? '');
  const exp = Number(m[3] ?? '0') - (m[2] ?? '').length + decimals;
  if (exp >= 0) return BigInt(digits) * 10n ** BigInt(exp);
  const cut = digits.length + exp;
  return cut <= 0 ? 0n : BigInt(digits.slice(0, cut));
}

const GWEI_DECIMALS = 9;

function gweiCap(v: number | undefined): bigint | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new Malformed('max_fee_per_gas_gwei');
  return toSmallest(String(v), GWEI_DECIMALS, 'max_fee_per_gas_gwei');
}

function intCap(v: string | undefined, field: string): bigint | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (!/^\d{1,30}$/.test(String(v))) throw new Malformed(field);
  return BigInt(v);
}

function amountCap(v: string | undefined, decimals: number, field: string): bigint | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new Malformed(field);
  return toSmallest(v, decimals, field);
}

/** The lower of two caps, undefined meaning none; with the field that sets it. */
function stricter(
  a: { cap: bigint; field: string } | undefined,
  b: { cap: bigint; field: string } | undefined,
): { cap: bigint; field: string } | undefined {
  if (!a) return b;
  if (!b) return a;
  return b.cap < a.cap ? b : a;
}

const capOf = (cap: bigint | undefined, field: string) => (cap === undefined ? undefined : { cap, field });

const HEX_ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/** Addresses compare case-insensitively when both are 0x-hex (EVM), exactly otherwise (base58, bech32…). */
export function sameAddress(a: string, b: string): boolean {
  const x = a.trim();
  const y = b.trim();
  if (HEX_ADDRESS.test(x) && HEX_ADDRESS.test(y)) return x.toLowerCase() === y.toLowerCase();
  return x === y;
}

function strings(v: unknown, field: string): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw new Malformed(field);
  return v;
}

/** The per-chain overrides that apply to a chain: those keyed by its name and by its numeric id. */
function chainOverrides(s: GuardrailSettings, chain: GuardrailChain): [string, ChainGuardrail][] {
  const all = s.perChainGuardrails ?? {};
  if (typeof all !== 'object' || Array.isArray(all)) throw new Malformed('per_chain_guardrails');
  const out: [string, ChainGuardrail][] = [];
  for (const key of new Set([chain.name, chain.chainId])) {
    const g = (all as Record<string, ChainGuardrail>)[key];
    if (g === undefined) continue;
    if (g === null || typeof g !== 'object') throw new Malformed(`per_chain_guardrails.${key}`);
    out.push([key, g]);
  }
  return out;
}

/**
 * Whether an `eip712_domain_allowlist` entry names a domain: an entry is a verifying contract
 * (`0x…`, case-insensitive), a domain name (exact), or `name@0x…` (both).
 */
export function domainMatches(entry: string, d: TypedDataRequest['domain']): boolean {
  const e = entry.trim();
  const at = e.lastIndexOf('@');
  if (at > 0 && HEX_ADDRESS.test(e.slice(at + 1))) {
    return (
      d.name === e.slice(0, at) &&
      d.verifyingContract !== undefined &&
      sameAddress(d.verifyingContract, e.slice(at + 1))
    );
  }
  if (HEX_ADDRESS.test(e)) return d.verifyingContract !== undefined && sameAddress(d.verifyingContract, e);
  return d.name !== undefined && d.name === e;
}

const fmt = (v: bigint) => v.toString();

/**
 * The guardrails a request violates, given the agent's settings and its totals of the UTC day on
 * the request's chain (before this request). Pure. An empty list: allowed. Malformed settings give
 * one `settings_invalid` verdict (fail closed) naming the setting. Where a global and a per-chain
 * limit both apply, the stricter wins (for allowlists: an address must be on both).
 */
export function evaluateGuardrails(
  settings: GuardrailSettings,
  request: GuardrailRequest,
  totals: GuardrailTotals = ZERO_TOTALS,
): Verdict[] {
  try {
    return evaluate(settings, request, totals);
  } catch (err) {
    if (err instanceof Malformed) {
      return [
        {
          reasonCode: 'settings_invalid',
          field: err.field,
          detail: `the agent's ${err.field} setting cannot be read; the request is refused until an owner fixes it`,
          always: true,
        },
      ];
    }
    throw err;
  }
}

function evaluate(s: GuardrailSettings, r: GuardrailRequest, t: GuardrailTotals): Verdict[] {
  const out: Verdict[] = [];
  const deny = (reasonCode: ReasonCode, field: string, detail: string, always = false) =>
    out.push({ reasonCode, field, detail, always });
  const chain = r.chain;
  const overrides = chainOverrides(s, chain);
  if (r.kind === 'typed_data') {
    const domainChain = r.domain.chainId;
    if (domainChain !== undefined && !sameChainId(domainChain, chain.chainId)) {
      deny(
        'eip712_domain_chain_mismatch',
        'typed_data.domain.chainId',
        `the domain's chainId ${domainChain.slice(0, 80)} is not ${chain.name}'s (${chain.chainId})`,
        true,
      );
    }
    const allow = strings(s.eip712DomainAllowlist, 'eip712_domain_allowlist');
    const policy = s.eip712DefaultPolicy ?? '';
    if (policy !== '' && policy !== 'allow' && policy !== 'deny')
      throw new Malformed('eip712_default_policy');
    // Unset reads as `deny`, identity's default for a new agent.
    if (policy !== 'allow' && !allow.some((e) => domainMatches(e, r.domain))) {
      deny(
        'eip712_domain_not_allowed',
        'eip712_domain_allowlist',
        'the EIP-712 domain is not on the agent\'s eip712_domain_allowlist and eip712_default_policy is "deny"',
      );
    }
    return out;
  }

  // Chains.
  const chains = strings(s.txAllowedChains, 'tx_allowed_chains');
  if (chains.length && !chains.some((c) => c.trim() === chain.name || c.trim() === chain.chainId)) {
    deny('chain_not_allowed', 'tx_allowed_chains', `${chain.name} is not in the agent's tx_allowed_chains`);
  }

  // Destinations: the global list and each per-chain list that is non-empty all must hold it.
  const lists: [string, string[]][] = [['tx_to_allowlist', strings(s.txToAllowlist, 'tx_to_allowlist')]];
  for (const [key, g] of overrides) {
    lists.push([
      `per_chain_guardrails.${key}.to_allowlist`,
      strings(g.toAllowlist, `per_chain_guardrails.${key}.to_allowlist`),
    ]);
  }
  for (const [field, list] of lists) {
    if (!list.length) continue;
    if (r.to === null || !list.some((a) => sameAddress(a, r.to!))) {
      deny(
        'to_not_allowed',
        field,
        r.to === null
          ? `a contract creation has no destination on ${field}`
          : `the destination is not on ${field}`,
      );
      break;
    }
  }

  // Value per transaction and per day.
  const d = chain.decimals;
  let maxValue = capOf(amountCap(s.txMaxValueEth, d, 'tx_max_value'), 'tx_max_value');
  let daily = capOf(amountCap(s.txDailyLimitEth, d, 'tx_daily_limit'), 'tx_daily_limit');
  let gasBudget: { cap: bigint; field: string } | undefined;
  for (const [key, g] of overrides) {
    const f = (n: string) => `per_chain_guardrails.${key}.${n}`;
    maxValue = stricter(maxValue, capOf(amountCap(g.maxValue, d, f('max_value')), f('max_value')));
    daily = stricter(daily, capOf(amountCap(g.dailyLimit, d, f('daily_limit')), f('daily_limit')));
    gasBudget = stricter(
      gasBudget,
      capOf(amountCap(g.gasDailyBudgetNative, d, f('gas_daily_budget_native')), f('gas_daily_budget_native')),
    );
  }
  if (maxValue && r.value > maxValue.cap) {
    deny(
      'tx_max_value_exceeded',
      maxValue.field,
      `value ${fmt(r.value)} is above ${maxValue.field} (${fmt(maxValue.cap)})`,
    );
  }
  if (daily && t.spent + r.value > daily.cap) {
    deny(
      'tx_daily_limit_exceeded',
      daily.field,
      `value ${fmt(r.value)} on top of today's ${fmt(t.spent)} (UTC) is above ${daily.field} (${fmt(daily.cap)})`,
    );
  }
  const perDay = intCap(s.txMaxPerDay, 'tx_max_per_day');
  if (perDay !== undefined && BigInt(t.count) + 1n > perDay) {
    deny(
      'tx_max_per_day_exceeded',
      'tx_max_per_day',
      `today's (UTC) ${t.count} transactions reach tx_max_per_day (${fmt(perDay)})`,
    );
  }

  // Fees and gas (EVM: present when the request has them).
  const feeCap = gweiCap(s.maxFeePerGasGwei);
  if (feeCap !== undefined && r.maxFeePerGas !== undefined && r.maxFeePerGas > feeCap) {
    deny(
      'max_fee_per_gas_exceeded',
      'max_fee_per_gas_gwei',
      `max fee per gas ${fmt(r.maxFeePerGas)} wei is above max_fee_per_gas_gwei (${fmt(feeCap)} wei)`,
    );
  }
  const gasCap = intCap(s.maxGasLimit, 'max_gas_limit');
  if (gasCap !== undefined && r.gasLimit !== undefined && r.gasLimit > gasCap) {
    deny(
      'max_gas_limit_exceeded',
      'max_gas_limit',
      `gas limit ${fmt(r.gasLimit)} is above max_gas_limit (${fmt(gasCap)})`,
    );
  }
  if (gasBudget) {
    const cost = gasCostOf(r);
    if (cost !== undefined && t.gasSpent + cost > gasBudget.cap) {
      deny(
        'gas_daily_budget_exceeded',
        gasBudget.field,
        `gas ${fmt(cost)} on top of today's ${fmt(t.gasSpent)} (UTC) is above ${gasBudget.field} (${fmt(gasBudget.cap)})`,
      );
    }
  }
  return out;
}

/**
 * The agent's EVM fee and gas caps as the evaluator reads them (`max_fee_per_gas_gwei` in wei,
 * rounded down; `max_gas_limit`), for signer's fill, which lowers fetched amounts to them and
 * refuses given ones above them: one reading of the settings for both. Undefined: no cap.
 * Unreadable settings give `invalid` with the setting's name.
 */
export function evmCaps(
  s: Pick<GuardrailSettings, 'maxFeePerGasGwei' | 'maxGasLimit'>,
): { maxFeePerGas?: bigint; maxGasLimit?: bigint } | { invalid: string } {
  try {
    const fee = gweiCap(s.maxFeePerGasGwei);
    const gas = intCap(s.maxGasLimit, 'max_gas_limit');
    return {
      ...(fee !== undefined ? { maxFeePerGas: fee } : {}),
      ...(gas !== undefined ? { maxGasLimit: gas } : {}),
    };
  } catch (err) {
    if (err instanceof Malformed) return { invalid: err.field };
    throw err;
  }
}

/** Whether a domain's chainId (decimal or 0x-hex) is the chain's. */
function sameChainId(v: string, chainId: string): boolean {
  const t = v.trim();
  if (!/^(\d{1,78}|0x[0-9a-fA-F]{1,64})$/.test(t)) return false;
  return BigInt(t) === BigInt(chainId);
}

/** The most a transaction can pay for gas (gas_limit × max_fee_per_gas); undefined when unknown. */
export function gasCostOf(r: Pick<TransactionRequest, 'gasLimit' | 'maxFeePerGas'>): bigint | undefined {
  return r.gasLimit !== undefined && r.maxFeePerGas !== undefined ? r.gasLimit * r.maxFeePerGas : undefined;
}
