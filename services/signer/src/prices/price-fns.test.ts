import { InvalidArgumentError } from '@custos/service-kit';
import {
  microsOfAnswer,
  parseFeeds,
  parsePriceTable,
  usdDecimalOf,
  usdMicrosOfDecimal,
  usdValueMicros,
} from './price-fns';

describe('USD amounts in micros', () => {
  it('reads and writes decimal dollars exactly', () => {
    expect(usdMicrosOfDecimal('3000.25')).toBe(3_000_250_000n);
    expect(usdMicrosOfDecimal('0.000001')).toBe(1n);
    expect(usdMicrosOfDecimal('12')).toBe(12_000_000n);
    for (const bad of ['', '-1', '1.0000001', '1e3', 'ten', '1,5'])
      expect(usdMicrosOfDecimal(bad)).toBeNull();
    expect(usdDecimalOf(12_500_000n)).toBe('12.5');
    expect(usdDecimalOf(3_000_250_000n)).toBe('3000.25');
    expect(usdDecimalOf(7n)).toBe('0.000007');
  });

  it('values smallest units at a price per whole unit, rounding up', () => {
    const ETH = 10n ** 18n;
    expect(usdValueMicros(ETH / 2n, 18, 3_000_000_000n)).toBe(1_500_000_000n);
    // One wei at $3000 is far below a micro: it still counts as one.
    expect(usdValueMicros(1n, 18, 3_000_000_000n)).toBe(1n);
    expect(usdValueMicros(0n, 18, 3_000_000_000n)).toBe(0n);
    // 1.5 USDC (6 decimals) at $1.
    expect(usdValueMicros(1_500_000n, 6, 1_000_000n)).toBe(1_500_000n);
  });

  it('converts a Chainlink answer of any decimals, refusing a non-positive one', () => {
    expect(microsOfAnswer(300_012_345_678n, 8)).toBe(3_000_123_456n);
    expect(microsOfAnswer(3000n, 0)).toBe(3_000_000_000n);
    expect(microsOfAnswer(0n, 8)).toBeNull();
    expect(microsOfAnswer(-5n, 8)).toBeNull();
  });
});

describe('price configuration', () => {
  const fieldOf = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      return err instanceof InvalidArgumentError ? err.field : String(err);
    }
    return undefined;
  };
  it('reads PRICE_TABLE_USD and refuses a malformed entry naming the variable', () => {
    expect(parsePriceTable('ETH=3000.5, BTC=65000')).toEqual(
      new Map([
        ['ETH', 3_000_500_000n],
        ['BTC', 65_000_000_000n],
      ]),
    );
    expect(parsePriceTable(undefined).size).toBe(0);
    for (const bad of ['ETH', 'eth=1', 'ETH=0', 'ETH=-1', 'ETH=1=2', 'ETH=abc'])
      expect(fieldOf(() => parsePriceTable(bad))).toBe('PRICE_TABLE_USD');
  });
  it('reads CHAINLINK_FEEDS: per asset, the EVM chain and aggregator it is read from', () => {
    const a = `0x${'Ab'.repeat(20)}`;
    expect(parseFeeds(`ETH=ethereum:${a}, BTC=ethereum:${a}`)).toEqual(
      new Map([
        ['ETH', { chain: 'ethereum', address: a.toLowerCase() }],
        ['BTC', { chain: 'ethereum', address: a.toLowerCase() }],
      ]),
    );
    for (const bad of [
      'ETH=0x1',
      `ethereum:ETH=${a}`,
      'ETH=ethereum:0x12',
      `ETH=Ethereum:${a}`,
      `eth=ethereum:${a}`,
    ])
      expect(fieldOf(() => parseFeeds(bad))).toBe('CHAINLINK_FEEDS');
  });
});
