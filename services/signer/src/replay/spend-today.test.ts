import { familyTotal, majorUnits } from './spend-today';

describe("the day's spend in major units", () => {
  it('writes smallest units as major units without trailing zeros', () => {
    expect(majorUnits(1_500_000_000_000_000_000n, 18)).toBe('1.5');
    expect(majorUnits(1n, 18)).toBe('0.000000000000000001');
    expect(majorUnits(0n, 8)).toBe('0');
    expect(majorUnits(250_000_000n, 8)).toBe('2.5');
    expect(majorUnits(42n, 0)).toBe('42');
  });
  it('sums chains of one family with different decimals without losing a unit', () => {
    expect(
      familyTotal([
        { value: 10n ** 18n, decimals: 18 },
        { value: 5n, decimals: 1 },
      ]),
    ).toBe('1.5');
    expect(
      familyTotal([
        { value: 1n, decimals: 18 },
        { value: 1n, decimals: 6 },
      ]),
    ).toBe('0.000001000000000001');
    expect(familyTotal([])).toBe('0');
  });
});
