import type { AgentFields } from '@custos/proto/custos/identity/v1/agents';
import { type ReplayTx, draftSettings, replayGuardrails } from './replay-fns';

// The replay of a draft over past transactions: the day's totals as the draft would have kept
// them, log vs enforce, and the draft applied over the agent's settings as a PATCH would be.

const ETH = 10n ** 18n;
const TO = `0x${'a'.repeat(40)}`;
let n = 0;
const tx = (value: bigint, at: string, over: Partial<ReplayTx> = {}): ReplayTx => ({
  id: `t${++n}`,
  createdAt: new Date(at),
  chainName: 'anvil',
  chainId: 31337n,
  decimals: 18,
  to: TO,
  value,
  ...over,
});
const fields = (f: Partial<AgentFields>): AgentFields => ({ clearedFields: [], ...f }) as AgentFields;
const codes = (d: ReturnType<typeof replayGuardrails>) =>
  d.map((x) => [x.tx.id, x.verdicts.map((v) => v.reasonCode)]);

describe('replayGuardrails', () => {
  it('denies what passes a per-transaction limit, in either mode', () => {
    const txs = [tx(ETH / 2n, '2026-11-20T10:00:00Z'), tx(2n * ETH, '2026-11-20T11:00:00Z')];
    expect(codes(replayGuardrails({ txMaxValueEth: '1' }, txs))).toEqual([
      [txs[1]!.id, ['tx_max_value_exceeded']],
    ]);
  });

  it('keeps the daily total per chain and UTC day; enforce does not count what it denies, log does', () => {
    const txs = [
      tx(ETH, '2026-11-20T01:00:00Z'),
      tx(ETH, '2026-11-20T02:00:00Z'),
      tx(ETH / 2n, '2026-11-20T03:00:00Z'),
      // Another chain and the next UTC day start from nothing.
      tx(ETH, '2026-11-20T04:00:00Z', { chainName: 'base', chainId: 8453n }),
      tx(ETH, '2026-11-21T00:00:01Z'),
    ];
    const enforce = { txDailyLimitEth: '1.5', executionGuardrails: { enforcement: 'enforce' } };
    // Enforce: the second is denied and not counted, so the third (1 + 0.5) fits.
    expect(codes(replayGuardrails(enforce, txs))).toEqual([[txs[1]!.id, ['tx_daily_limit_exceeded']]]);
    // Log: the second went through and counts, so the third passes the limit too.
    expect(codes(replayGuardrails({ txDailyLimitEth: '1.5' }, txs))).toEqual([
      [txs[1]!.id, ['tx_daily_limit_exceeded']],
      [txs[2]!.id, ['tx_daily_limit_exceeded']],
    ]);
  });

  it('judges the gas budget and destination lists with the same evaluator', () => {
    const other = `0x${'b'.repeat(40)}`;
    const txs = [tx(1n, '2026-11-20T01:00:00Z', { to: other, gasLimit: 21_000n, maxFeePerGas: 10n ** 12n })];
    expect(codes(replayGuardrails({ txToAllowlist: [TO], maxGasLimit: '20000' }, txs))).toEqual([
      [txs[0]!.id, ['to_not_allowed', 'max_gas_limit_exceeded']],
    ]);
  });

  it('denies nothing without limits', () => {
    expect(replayGuardrails({}, [tx(100n * ETH, '2026-11-20T01:00:00Z')])).toEqual([]);
  });
});

describe('draftSettings', () => {
  const current = { txMaxValueEth: '1', txDailyLimitEth: '5', txToAllowlist: [TO] };
  it('applies the draft’s fields over the agent’s and keeps the rest', () => {
    expect(
      draftSettings(current, fields({ txMaxValueEth: '2', txAllowedChains: { values: ['anvil'] } })),
    ).toEqual({
      txMaxValueEth: '2',
      txDailyLimitEth: '5',
      txToAllowlist: [TO],
      txAllowedChains: ['anvil'],
    });
  });
  it('unsets the limits named in cleared_fields, and ignores fields that are not guardrails', () => {
    const d = draftSettings(
      current,
      fields({ clearedFields: ['tx_daily_limit_eth', 'description'], name: 'x' }),
    );
    expect(d).toEqual({ txMaxValueEth: '1', txToAllowlist: [TO] });
  });
  it('without a draft, replays the agent’s own settings', () => {
    expect(draftSettings(current, undefined)).toEqual(current);
  });
});
