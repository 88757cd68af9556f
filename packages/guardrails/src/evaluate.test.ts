import {
  type GuardrailSettings,
  type TransactionRequest,
  type TypedDataRequest,
  REASON_CODES,
  domainMatches,
  enforcementOf,
  evaluateGuardrails,
  evmCaps,
  toSmallest,
} from './index.js';

const ETH = 10n ** 18n;
const GWEI = 10n ** 9n;
const A = `0x${'a'.repeat(40)}`;
const B = `0x${'b'.repeat(40)}`;
const chain = { name: 'anvil', chainId: '31337', decimals: 18 };
const tx = (o: Partial<TransactionRequest> = {}): TransactionRequest => ({
  kind: 'transaction',
  chain,
  to: A,
  value: ETH,
  gasLimit: 21_000n,
  maxFeePerGas: 2n * GWEI,
  ...o,
});
const typed = (domain: TypedDataRequest['domain']): TypedDataRequest => ({
  kind: 'typed_data',
  chain,
  domain,
});
/** Every reason code some test saw: the last test checks that none is left untested. */
const seen = new Set<string>();
const codes = (
  s: GuardrailSettings,
  r: Parameters<typeof evaluateGuardrails>[1],
  t = { spent: 0n, gasSpent: 0n, count: 0 },
) => {
  const c = evaluateGuardrails(s, r, t).map((v) => v.reasonCode);
  c.forEach((x) => seen.add(x));
  return c;
};

describe('evaluateGuardrails: one test per reason code', () => {
  it('allows everything with no guardrails set', () => {
    expect(codes({ eip712DefaultPolicy: 'allow' }, tx())).toEqual([]);
    expect(codes({ eip712DefaultPolicy: 'allow' }, typed({ name: 'X', chainId: '31337' }))).toEqual([]);
  });

  it('settings_invalid: a malformed amount fails closed, naming the setting, in log mode too', () => {
    const v = evaluateGuardrails({ txMaxValueEth: 'ten' }, tx());
    expect(v).toEqual([
      expect.objectContaining({ reasonCode: 'settings_invalid', field: 'tx_max_value', always: true }),
    ]);
    seen.add('settings_invalid');
    expect(codes({ maxGasLimit: '-1' }, tx())).toEqual(['settings_invalid']);
    expect(codes({ maxFeePerGasGwei: Number.NaN }, tx())).toEqual(['settings_invalid']);
    expect(codes({ txToAllowlist: 'x' as unknown as string[] }, tx())).toEqual(['settings_invalid']);
    expect(codes({ eip712DefaultPolicy: 'maybe' }, typed({}))).toEqual(['settings_invalid']);
    expect(codes({ perChainGuardrails: { anvil: { toAllowlist: [], dailyLimit: '1,5' } } }, tx())).toEqual([
      'settings_invalid',
    ]);
  });

  it('chain_not_allowed: by name or by chain id', () => {
    expect(codes({ txAllowedChains: ['ethereum'] }, tx())).toEqual(['chain_not_allowed']);
    expect(codes({ txAllowedChains: ['anvil'] }, tx())).toEqual([]);
    expect(codes({ txAllowedChains: ['31337'] }, tx())).toEqual([]);
  });

  it('to_not_allowed: global list, per-chain list (both must hold it), contract creation', () => {
    expect(codes({ txToAllowlist: [B] }, tx())).toEqual(['to_not_allowed']);
    expect(codes({ txToAllowlist: [A.toUpperCase().replace('0X', '0x')] }, tx())).toEqual([]);
    expect(codes({ txToAllowlist: [A] }, tx({ to: null }))).toEqual(['to_not_allowed']);
    const both = { txToAllowlist: [A], perChainGuardrails: { anvil: { toAllowlist: [B] } } };
    expect(evaluateGuardrails(both, tx())).toEqual([
      expect.objectContaining({
        reasonCode: 'to_not_allowed',
        field: 'per_chain_guardrails.anvil.to_allowlist',
      }),
    ]);
    expect(codes({ perChainGuardrails: { ethereum: { toAllowlist: [B] } } }, tx())).toEqual([]);
    // Non-hex addresses compare exactly.
    expect(codes({ txToAllowlist: ['bc1qabc'] }, tx({ to: 'BC1QABC' }))).toEqual(['to_not_allowed']);
  });

  it('tx_max_value_exceeded: the stricter of tx_max_value and the per-chain max_value', () => {
    expect(codes({ txMaxValueEth: '1' }, tx())).toEqual([]);
    expect(codes({ txMaxValueEth: '0.999999999999999999' }, tx())).toEqual(['tx_max_value_exceeded']);
    const v = evaluateGuardrails(
      { txMaxValueEth: '5', perChainGuardrails: { anvil: { toAllowlist: [], maxValue: '0.5' } } },
      tx(),
    );
    expect(v).toEqual([
      expect.objectContaining({
        reasonCode: 'tx_max_value_exceeded',
        field: 'per_chain_guardrails.anvil.max_value',
      }),
    ]);
    // Keyed by chain id as well.
    expect(codes({ perChainGuardrails: { '31337': { toAllowlist: [], maxValue: '0.5' } } }, tx())).toEqual([
      'tx_max_value_exceeded',
    ]);
  });

  it('tx_daily_limit_exceeded: today plus this one above the cap; exactly at the cap passes', () => {
    const s = { txDailyLimitEth: '3' };
    expect(codes(s, tx(), { spent: 2n * ETH, gasSpent: 0n, count: 2 })).toEqual([]);
    expect(codes(s, tx(), { spent: 2n * ETH + 1n, gasSpent: 0n, count: 2 })).toEqual([
      'tx_daily_limit_exceeded',
    ]);
    expect(
      codes(
        { txDailyLimitEth: '9', perChainGuardrails: { anvil: { toAllowlist: [], dailyLimit: '1.5' } } },
        tx(),
        {
          spent: ETH,
          gasSpent: 0n,
          count: 1,
        },
      ),
    ).toEqual(['tx_daily_limit_exceeded']);
  });

  it('tx_max_per_day_exceeded: the count of the day reaching tx_max_per_day', () => {
    expect(codes({ txMaxPerDay: '2' }, tx(), { spent: 0n, gasSpent: 0n, count: 1 })).toEqual([]);
    expect(codes({ txMaxPerDay: '2' }, tx(), { spent: 0n, gasSpent: 0n, count: 2 })).toEqual([
      'tx_max_per_day_exceeded',
    ]);
    expect(codes({ txMaxPerDay: '0' }, tx())).toEqual(['tx_max_per_day_exceeded']);
  });

  it('max_fee_per_gas_exceeded: fractional gwei caps', () => {
    expect(codes({ maxFeePerGasGwei: 2 }, tx())).toEqual([]);
    expect(codes({ maxFeePerGasGwei: 1.5 }, tx())).toEqual(['max_fee_per_gas_exceeded']);
    expect(codes({ maxFeePerGasGwei: 1.5 }, tx({ maxFeePerGas: 1_500_000_000n }))).toEqual([]);
    // A request without fees (a non-EVM transfer) is not judged on them.
    expect(codes({ maxFeePerGasGwei: 0 }, tx({ maxFeePerGas: undefined }))).toEqual([]);
  });

  it('max_gas_limit_exceeded', () => {
    expect(codes({ maxGasLimit: '21000' }, tx())).toEqual([]);
    expect(codes({ maxGasLimit: '20999' }, tx())).toEqual(['max_gas_limit_exceeded']);
  });

  it('gas_daily_budget_exceeded: Σ gas_limit × max_fee_per_gas of the day against the per-chain budget', () => {
    const cost = 21_000n * 2n * GWEI; // 0.000042 ETH
    const s = { perChainGuardrails: { anvil: { toAllowlist: [], gasDailyBudgetNative: '0.000084' } } };
    expect(codes(s, tx(), { spent: 0n, gasSpent: cost, count: 1 })).toEqual([]);
    expect(codes(s, tx(), { spent: 0n, gasSpent: cost + 1n, count: 1 })).toEqual([
      'gas_daily_budget_exceeded',
    ]);
  });

  it('eip712_domain_not_allowed: default deny (and unset) refuses a domain off the allowlist', () => {
    const d = { name: 'Permit2', chainId: '31337', verifyingContract: A };
    expect(codes({ eip712DefaultPolicy: 'deny' }, typed(d))).toEqual(['eip712_domain_not_allowed']);
    expect(codes({}, typed(d))).toEqual(['eip712_domain_not_allowed']);
    expect(codes({ eip712DefaultPolicy: 'deny', eip712DomainAllowlist: ['Permit2'] }, typed(d))).toEqual([]);
    expect(
      codes(
        { eip712DefaultPolicy: 'deny', eip712DomainAllowlist: [A.toUpperCase().replace('0X', '0x')] },
        typed(d),
      ),
    ).toEqual([]);
    expect(codes({ eip712DefaultPolicy: 'deny', eip712DomainAllowlist: [`Permit2@${B}`] }, typed(d))).toEqual(
      ['eip712_domain_not_allowed'],
    );
    expect(codes({ eip712DefaultPolicy: 'allow' }, typed(d))).toEqual([]);
  });

  it('eip712_domain_chain_mismatch: always refused, even under allow', () => {
    const v = evaluateGuardrails({ eip712DefaultPolicy: 'allow' }, typed({ name: 'X', chainId: '1' }));
    expect(v).toEqual([
      expect.objectContaining({ reasonCode: 'eip712_domain_chain_mismatch', always: true }),
    ]);
    expect(codes({ eip712DefaultPolicy: 'allow' }, typed({ chainId: '31337 ' }))).toEqual([]);
    expect(codes({ eip712DefaultPolicy: 'allow' }, typed({ chainId: '0x7a69' }))).toEqual([]);
    expect(codes({ eip712DefaultPolicy: 'allow' }, typed({ chainId: '31337.0' }))).toEqual([
      'eip712_domain_chain_mismatch',
    ]);
  });

  it('saw every reason code in the tests above', () => {
    expect([...REASON_CODES].filter((c) => !seen.has(c))).toEqual([]);
  });
});

describe('helpers', () => {
  it('toSmallest reads decimals and exponents, rounding down below the unit', () => {
    expect(toSmallest('1', 18, 'f')).toBe(ETH);
    expect(toSmallest('0.5', 18, 'f')).toBe(ETH / 2n);
    expect(toSmallest('1e-7', 18, 'f')).toBe(10n ** 11n);
    expect(toSmallest('1.5e3', 2, 'f')).toBe(150_000n);
    expect(toSmallest('0.123', 2, 'f')).toBe(12n);
    expect(() => toSmallest('-1', 18, 'f')).toThrow();
    expect(() => toSmallest('', 18, 'f')).toThrow();
  });

  it('evmCaps reads the fee and gas caps as the evaluator does (rounding sub-wei gwei down)', () => {
    expect(evmCaps({})).toEqual({});
    expect(evmCaps({ maxFeePerGasGwei: 2.5, maxGasLimit: '50000' })).toEqual({
      maxFeePerGas: 2_500_000_000n,
      maxGasLimit: 50_000n,
    });
    expect(evmCaps({ maxFeePerGasGwei: 1.0000000009 })).toEqual({ maxFeePerGas: 1_000_000_000n });
    expect(evmCaps({ maxFeePerGasGwei: 1e21 })).toEqual({ maxFeePerGas: 10n ** 30n });
    expect(evmCaps({ maxFeePerGasGwei: -1 })).toEqual({ invalid: 'max_fee_per_gas_gwei' });
    expect(evmCaps({ maxGasLimit: 'x' })).toEqual({ invalid: 'max_gas_limit' });
    // A fee at the cap evmCaps gives is never a max_fee_per_gas_exceeded verdict.
    const cap = evmCaps({ maxFeePerGasGwei: 1.0000000009 }) as { maxFeePerGas: bigint };
    expect(
      evaluateGuardrails(
        { maxFeePerGasGwei: 1.0000000009 },
        { kind: 'transaction', chain, to: A, value: 0n, maxFeePerGas: cap.maxFeePerGas },
      ),
    ).toEqual([]);
  });

  it('enforcementOf defaults to log', () => {
    expect(enforcementOf({})).toBe('log');
    expect(enforcementOf({ executionGuardrails: { enforcement: 'enforce' } })).toBe('enforce');
  });

  it('domainMatches an entry by name, contract, or both', () => {
    expect(domainMatches('USDC', { name: 'USDC' })).toBe(true);
    expect(domainMatches('usdc', { name: 'USDC' })).toBe(false);
    expect(domainMatches(`USDC@${A}`, { name: 'USDC', verifyingContract: A })).toBe(true);
    expect(domainMatches(A, { name: 'USDC' })).toBe(false);
  });
});
