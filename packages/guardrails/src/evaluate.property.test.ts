import fc from 'fast-check';
import type { ChainGuardrail } from '@custos/proto/custos/identity/v1/agents';
import {
  type GuardrailRequest,
  type GuardrailSettings,
  type GuardrailTotals,
  compareGuardrails,
  evaluateGuardrails,
} from './index.js';

// The evaluator against a small reference model written from the rules in docs/guardrails.md, over
// random settings, requests and totals drawn from small vocabularies (so that limits are hit often
// and exactly at the edge); and the properties of compareGuardrails against the evaluator.

const CHAINS = [
  { name: 'anvil', chainId: '31337' },
  { name: 'base', chainId: '8453' },
];
const ADDRS = [`0x${'a'.repeat(40)}`, `0x${'A'.repeat(40)}`, `0x${'b'.repeat(40)}`, 'rAbc', 'rabc'];
const NAMES = ['USDC', 'Permit2', 'usdc'];

/** An amount as a rational n / 10^k and the text the settings carry. */
interface Amount {
  n: bigint;
  k: number;
  text: string;
}
const amountArb: fc.Arbitrary<Amount> = fc
  .record({
    n: fc.bigInt({ min: 0n, max: 3000n }),
    k: fc.integer({ min: 0, max: 20 }),
    exp: fc.boolean(),
  })
  .map(({ n, k, exp }) => {
    if (exp) return { n, k, text: `${n}e-${k}` };
    const s = n.toString().padStart(k + 1, '0');
    return { n, k, text: k === 0 ? s : `${s.slice(0, s.length - k)}.${s.slice(s.length - k)}` };
  });
/** Reference: floor(n / 10^k × 10^d). */
const refSmallest = (a: Amount, d: number) => (a.n * 10n ** BigInt(d)) / 10n ** BigInt(a.k);

interface RefChain {
  maxValue?: Amount;
  dailyLimit?: Amount;
  gas?: Amount;
  to: string[];
}
interface Model {
  enforce: boolean;
  maxValue?: Amount;
  daily?: Amount;
  perDay?: number;
  feeGwei?: { n: number; k: number };
  gasLimit?: number;
  to: string[];
  chains: string[];
  eipAllow: string[];
  eipPolicy: 'allow' | 'deny';
  perChain: Record<string, RefChain>;
}

const opt = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });
const refChainArb: fc.Arbitrary<RefChain> = fc.record({
  maxValue: opt(amountArb),
  dailyLimit: opt(amountArb),
  gas: opt(amountArb),
  to: fc.subarray(ADDRS),
});
const modelArb: fc.Arbitrary<Model> = fc.record({
  enforce: fc.boolean(),
  maxValue: opt(amountArb),
  daily: opt(amountArb),
  perDay: opt(fc.integer({ min: 0, max: 4 })),
  feeGwei: opt(fc.record({ n: fc.integer({ min: 0, max: 40 }), k: fc.integer({ min: 0, max: 2 }) })),
  gasLimit: opt(fc.integer({ min: 0, max: 60_000 })),
  to: fc.subarray(ADDRS),
  chains: fc.subarray(['anvil', 'base', '31337', 'ethereum']),
  eipAllow: fc.subarray([...NAMES, ADDRS[0]!, `Permit2@${ADDRS[2]}`]),
  eipPolicy: fc.constantFrom('allow' as const, 'deny' as const),
  perChain: fc.dictionary(fc.constantFrom('anvil', 'base', '31337', 'ethereum'), refChainArb, { maxKeys: 3 }),
});

/** The model as identity's Agent carries it. */
function settingsOf(m: Model): GuardrailSettings {
  const perChain: Record<string, ChainGuardrail> = {};
  for (const [k, c] of Object.entries(m.perChain)) {
    perChain[k] = {
      toAllowlist: c.to,
      ...(c.maxValue ? { maxValue: c.maxValue.text } : {}),
      ...(c.dailyLimit ? { dailyLimit: c.dailyLimit.text } : {}),
      ...(c.gas ? { gasDailyBudgetNative: c.gas.text } : {}),
    };
  }
  return {
    executionGuardrails: { enforcement: m.enforce ? 'enforce' : 'log' },
    perChainGuardrails: perChain,
    ...(m.maxValue ? { txMaxValueEth: m.maxValue.text } : {}),
    ...(m.daily ? { txDailyLimitEth: m.daily.text } : {}),
    ...(m.perDay !== undefined ? { txMaxPerDay: String(m.perDay) } : {}),
    ...(m.feeGwei ? { maxFeePerGasGwei: m.feeGwei.n / 10 ** m.feeGwei.k } : {}),
    ...(m.gasLimit !== undefined ? { maxGasLimit: String(m.gasLimit) } : {}),
    txToAllowlist: m.to,
    txAllowedChains: m.chains,
    eip712DomainAllowlist: m.eipAllow,
    eip712DefaultPolicy: m.eipPolicy,
  };
}

const chainArb = fc.record({
  c: fc.constantFrom(...CHAINS),
  decimals: fc.constantFrom(0, 6, 18),
});
const txArb = fc.record({
  chain: chainArb,
  to: fc.option(fc.constantFrom(...ADDRS), { nil: null }),
  value: fc.bigInt({ min: 0n, max: 4n * 10n ** 18n }),
  valueScale: fc.integer({ min: 0, max: 18 }),
  gasLimit: opt(fc.bigInt({ min: 0n, max: 60_000n })),
  maxFee: opt(fc.bigInt({ min: 0n, max: 40n * 10n ** 9n })),
});
const typedArb = fc.record({
  chain: chainArb,
  name: opt(fc.constantFrom(...NAMES, 'Other')),
  contract: opt(fc.constantFrom(...ADDRS)),
  chainId: opt(fc.constantFrom('31337', '8453', '1', '0x7a69')),
});
const totalsArb = fc.record({
  spent: fc.bigInt({ min: 0n, max: 4n * 10n ** 18n }),
  gasSpent: fc.bigInt({ min: 0n, max: 10n ** 15n }),
  count: fc.integer({ min: 0, max: 5 }),
});
type Tx = typeof txArb extends fc.Arbitrary<infer T> ? T : never;
type Typed = typeof typedArb extends fc.Arbitrary<infer T> ? T : never;

function requestOf(r: { kind: 'tx'; t: Tx } | { kind: 'typed'; t: Typed }): GuardrailRequest {
  const chain = { name: r.t.chain.c.name, chainId: r.t.chain.c.chainId, decimals: r.t.chain.decimals };
  if (r.kind === 'typed') {
    return {
      kind: 'typed_data',
      chain,
      domain: {
        ...(r.t.name ? { name: r.t.name } : {}),
        ...(r.t.contract ? { verifyingContract: r.t.contract } : {}),
        ...(r.t.chainId ? { chainId: r.t.chainId } : {}),
      },
    };
  }
  return {
    kind: 'transaction',
    chain,
    to: r.t.to,
    // Values of all scales, so that caps of every size are met at their edge.
    value: r.t.value / 10n ** BigInt(r.t.valueScale),
    ...(r.t.gasLimit !== undefined ? { gasLimit: r.t.gasLimit } : {}),
    ...(r.t.maxFee !== undefined ? { maxFeePerGas: r.t.maxFee } : {}),
  };
}

/** The reference: the set of reason codes, from the model directly. */
function reference(m: Model, r: GuardrailRequest, t: GuardrailTotals): string[] {
  const out = new Set<string>();
  const { name, chainId, decimals } = r.chain;
  const over = [m.perChain[name], name === chainId ? undefined : m.perChain[chainId]].filter(
    (x): x is RefChain => x !== undefined,
  );
  const addrEq = (a: string, b: string) =>
    a.startsWith('0x') && b.startsWith('0x') ? a.toLowerCase() === b.toLowerCase() : a === b;
  if (r.kind === 'typed_data') {
    const d = r.domain;
    if (d.chainId !== undefined && BigInt(d.chainId) !== BigInt(chainId))
      out.add('eip712_domain_chain_mismatch');
    if (m.eipPolicy === 'deny') {
      const ok = m.eipAllow.some((e) => {
        if (e.includes('@')) {
          const [n, c] = e.split('@') as [string, string];
          return d.name === n && d.verifyingContract !== undefined && addrEq(d.verifyingContract, c);
        }
        if (e.startsWith('0x')) return d.verifyingContract !== undefined && addrEq(d.verifyingContract, e);
        return d.name === e;
      });
      if (!ok) out.add('eip712_domain_not_allowed');
    }
    return [...out].sort();
  }
  if (m.chains.length && !m.chains.includes(name) && !m.chains.includes(chainId))
    out.add('chain_not_allowed');
  for (const list of [m.to, ...over.map((o) => o.to)]) {
    if (list.length && (r.to === null || !list.some((a) => addrEq(a, r.to!)))) out.add('to_not_allowed');
  }
  const min = (xs: (Amount | undefined)[]) => {
    const v = xs.filter((x): x is Amount => x !== undefined).map((x) => refSmallest(x, decimals));
    return v.length ? v.reduce((a, b) => (b < a ? b : a)) : undefined;
  };
  const maxValue = min([m.maxValue, ...over.map((o) => o.maxValue)]);
  if (maxValue !== undefined && r.value > maxValue) out.add('tx_max_value_exceeded');
  const daily = min([m.daily, ...over.map((o) => o.dailyLimit)]);
  if (daily !== undefined && t.spent + r.value > daily) out.add('tx_daily_limit_exceeded');
  if (m.perDay !== undefined && t.count >= m.perDay) out.add('tx_max_per_day_exceeded');
  if (m.feeGwei && r.maxFeePerGas !== undefined) {
    const cap = (BigInt(m.feeGwei.n) * 10n ** 9n) / 10n ** BigInt(m.feeGwei.k);
    if (r.maxFeePerGas > cap) out.add('max_fee_per_gas_exceeded');
  }
  if (m.gasLimit !== undefined && r.gasLimit !== undefined && r.gasLimit > BigInt(m.gasLimit)) {
    out.add('max_gas_limit_exceeded');
  }
  const gas = min(over.map((o) => o.gas));
  if (gas !== undefined && r.gasLimit !== undefined && r.maxFeePerGas !== undefined) {
    if (t.gasSpent + r.gasLimit * r.maxFeePerGas > gas) out.add('gas_daily_budget_exceeded');
  }
  return [...out].sort();
}

const requestArb = fc.oneof(
  { weight: 4, arbitrary: txArb.map((t) => ({ kind: 'tx' as const, t })) },
  { weight: 1, arbitrary: typedArb.map((t) => ({ kind: 'typed' as const, t })) },
);
const codesOf = (s: GuardrailSettings, r: GuardrailRequest, t: GuardrailTotals) =>
  [...new Set(evaluateGuardrails(s, r, t).map((v) => v.reasonCode))].sort();

describe('evaluateGuardrails against the reference model', () => {
  it('agrees on 10,000 random cases (0 differences), and denies often enough to mean something', () => {
    let denied = 0;
    fc.assert(
      fc.property(modelArb, requestArb, totalsArb, (m, rr, t) => {
        const r = requestOf(rr);
        const got = codesOf(settingsOf(m), r, t);
        if (got.length) denied++;
        expect(got).toEqual(reference(m, r, t));
      }),
      { numRuns: 10_000 },
    );
    expect(denied).toBeGreaterThan(2_000);
    expect(denied).toBeLessThan(9_800);
  });
});

describe('compareGuardrails', () => {
  it('orders the enforcement modes log < approve < enforce', () => {
    const mode = (enforcement: string) => ({ executionGuardrails: { enforcement } });
    expect(compareGuardrails(mode('log'), mode('approve'))).toBe('narrow');
    expect(compareGuardrails(mode('approve'), mode('enforce'))).toBe('narrow');
    expect(compareGuardrails(mode('enforce'), mode('approve'))).toBe('widen');
    expect(compareGuardrails(mode('approve'), mode('log'))).toBe('widen');
    expect(compareGuardrails(mode('approve'), mode('approve'))).toBe('same');
  });

  it('an unchanged setting is the same; swapping the sides swaps narrow and widen', () => {
    fc.assert(
      fc.property(modelArb, modelArb, (a, b) => {
        const sa = settingsOf(a);
        const sb = settingsOf(b);
        expect(compareGuardrails(sa, sa)).toBe('same');
        const there = compareGuardrails(sa, sb);
        const back = compareGuardrails(sb, sa);
        const swap = { same: 'same', narrow: 'widen', widen: 'narrow', mixed: 'mixed' } as const;
        expect(back).toBe(swap[there]);
      }),
      { numRuns: 2_000 },
    );
  });

  it('a narrowing never allows what the old settings denied (checked through the evaluator)', () => {
    let narrow = 0;
    fc.assert(
      fc.property(
        modelArb,
        modelArb,
        fc.array(fc.tuple(requestArb, totalsArb), { minLength: 5, maxLength: 5 }),
        (a, b, cases) => {
          const sa = settingsOf(a);
          // Half of the runs derive b from a by tightening, so that narrowings are common.
          const sb = settingsOf(b);
          const change = compareGuardrails(sa, sb);
          if (change !== 'narrow' && change !== 'same') return;
          narrow++;
          for (const [rr, t] of cases) {
            const r = requestOf(rr);
            const before = codesOf(sa, r, t);
            const after = codesOf(sb, r, t);
            expect(before.filter((c) => !after.includes(c))).toEqual([]);
          }
        },
      ),
      { numRuns: 4_000 },
    );
    expect(narrow).toBeGreaterThan(0);
  });

  it('tightening one limit of any settings is a narrowing (or the same), loosening it a widening', () => {
    fc.assert(
      fc.property(
        modelArb,
        amountArb,
        fc.array(fc.tuple(requestArb, totalsArb), { minLength: 5, maxLength: 5 }),
        (a, cap, cases) => {
          const tight: Model = {
            ...a,
            enforce: true,
            maxValue:
              a.maxValue && a.maxValue.n * 10n ** BigInt(cap.k) < cap.n * 10n ** BigInt(a.maxValue.k)
                ? a.maxValue
                : cap,
            to: a.to.length ? a.to.slice(0, 1) : [ADDRS[2]!],
            eipPolicy: 'deny',
            eipAllow: a.eipPolicy === 'deny' ? a.eipAllow.slice(0, 1) : [],
          };
          const sa = settingsOf(a);
          const st = settingsOf(tight);
          expect(['narrow', 'same']).toContain(compareGuardrails(sa, st));
          expect(['widen', 'same']).toContain(compareGuardrails(st, sa));
          for (const [rr, t] of cases) {
            const r = requestOf(rr);
            const before = codesOf(sa, r, t);
            const after = codesOf(st, r, t);
            expect(before.filter((c) => !after.includes(c))).toEqual([]);
          }
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it('names unreadable settings mixed, never narrow', () => {
    expect(compareGuardrails({ txMaxValueEth: '1' }, { txMaxValueEth: 'one' })).toBe('mixed');
    expect(compareGuardrails({}, { maxGasLimit: '1' })).toBe('narrow');
    expect(compareGuardrails({ maxGasLimit: '1' }, {})).toBe('widen');
    expect(compareGuardrails({ txToAllowlist: ['x'] }, { txToAllowlist: ['y'] })).toBe('mixed');
    expect(compareGuardrails({ txMaxValueEth: '1' }, { txMaxValueEth: '1.000' })).toBe('same');
    expect(
      compareGuardrails(
        { txMaxValueEth: '1' },
        { txMaxValueEth: '2', executionGuardrails: { enforcement: 'enforce' } },
      ),
    ).toBe('mixed');
  });
});
