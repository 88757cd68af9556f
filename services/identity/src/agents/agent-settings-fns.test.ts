import { settingsFromStored, settingsToStored } from './agent-settings-fns';

describe('agent settings as stored', () => {
  it('keeps per-chain limits stored as JSON numbers (rows written before typed contracts)', () => {
    const s = settingsFromStored({
      per_chain_guardrails: { ethereum: { max_value: 1.5, daily_limit: 10, gas_daily_budget_native: 0.02 } },
    });
    expect(s.perChainGuardrails['ethereum']).toEqual({
      maxValue: '1.5',
      dailyLimit: '10',
      gasDailyBudgetNative: '0.02',
    });
    // Written back (any PATCH writes the whole settings), the limits survive as decimal strings.
    expect(settingsToStored(s)['per_chain_guardrails']).toEqual({
      ethereum: { max_value: '1.5', daily_limit: '10', gas_daily_budget_native: '0.02' },
    });
  });

  it('keeps decimal strings as they are and ignores values that are not amounts', () => {
    const s = settingsFromStored({
      per_chain_guardrails: { base: { max_value: '0.25', daily_limit: true } },
    });
    expect(s.perChainGuardrails['base']).toEqual({ maxValue: '0.25' });
  });
});
