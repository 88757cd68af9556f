import fc from 'fast-check';
import { InvalidArgumentError } from '@custos/service-kit';
import { formatUnits } from 'ethers';
import {
  MAX_UINT256,
  gweiToWei,
  parseEvmAddress,
  parseEvmData,
  parseEvmValue,
  parseGasLimit,
  parseWei,
} from './evm-fields.js';

function fieldOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (err) {
    if (err instanceof InvalidArgumentError) return err.field;
    throw err;
  }
  return undefined;
}

describe('parseEvmValue', () => {
  it('reads hex and decimal integers as wei, decimals with a fraction as ETH', () => {
    expect(parseEvmValue('0x10', 18)).toBe(16n);
    expect(parseEvmValue('1000', 18)).toBe(1000n);
    expect(parseEvmValue('0.01', 18)).toBe(10n ** 16n);
    expect(parseEvmValue('1.5', 6)).toBe(1_500_000n);
    expect(parseEvmValue('0.000000000000000001', 18)).toBe(1n);
    expect(parseEvmValue('1.000', 0)).toBe(1n);
    expect(parseEvmValue(MAX_UINT256.toString(), 18)).toBe(MAX_UINT256);
  });

  it('refuses everything else with a 400 naming value', () => {
    for (const bad of [
      '',
      '-1',
      '+1',
      '1e18',
      ' 1',
      '1 ',
      '0x',
      '0xg1',
      '.5',
      '1.',
      '0.0000000000000000001',
      'abc',
      (MAX_UINT256 + 1n).toString(),
      `0x1${'0'.repeat(64)}`,
      '1'.repeat(101),
    ]) {
      expect(fieldOf(() => parseEvmValue(bad, 18))).toBe('value');
    }
  });

  it('property: any wei amount round-trips through its decimal, hex and ETH spellings', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: MAX_UINT256 }),
        fc.integer({ min: 0, max: 30 }),
        (wei, decimals) => {
          expect(parseEvmValue(wei.toString(), decimals)).toBe(wei);
          expect(parseEvmValue(`0x${wei.toString(16)}`, decimals)).toBe(wei);
          const major = formatUnits(wei, decimals);
          if (major.includes('.')) expect(parseEvmValue(major, decimals)).toBe(wei);
        },
      ),
    );
  });

  it('property: any string is either a wei amount in range or a 400 naming value, never a crash', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.stringMatching(/^-?[0-9]{0,90}(\.[0-9]{0,30})?$/),
          fc.stringMatching(/^0x[0-9a-fA-F]{0,70}$/),
        ),
        (s) => {
          let v: bigint | undefined;
          try {
            v = parseEvmValue(s, 18);
          } catch (err) {
            expect(err).toBeInstanceOf(InvalidArgumentError);
            expect((err as InvalidArgumentError).field).toBe('value');
            return;
          }
          expect(v >= 0n && v <= MAX_UINT256).toBe(true);
        },
      ),
    );
  });
});

describe('parseEvmAddress', () => {
  const checksummed = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';
  it('takes checksummed or all lower-case addresses and answers them checksummed', () => {
    expect(parseEvmAddress(checksummed)).toBe(checksummed);
    expect(parseEvmAddress(checksummed.toLowerCase())).toBe(checksummed);
  });
  it('refuses a wrong checksum, wrong length or non-hex with a 400 naming to', () => {
    const wrong = `0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD`;
    for (const bad of [
      wrong,
      checksummed.toUpperCase().replace('0X', '0x'),
      '0x1234',
      `${checksummed}00`,
      'hello',
      '',
    ]) {
      expect(fieldOf(() => parseEvmAddress(bad))).toBe('to');
    }
  });
});

describe('parseEvmData, parseWei, parseGasLimit, gweiToWei', () => {
  it('reads calldata as even-length 0x hex', () => {
    expect(parseEvmData('')).toBe('0x');
    expect(parseEvmData('0xABcd')).toBe('0xabcd');
    for (const bad of ['0xabc', 'abcd', '0xzz']) expect(fieldOf(() => parseEvmData(bad))).toBe('data');
  });
  it('reads fee amounts as wei and gas limits as positive integers', () => {
    expect(parseWei('0x3b9aca00', 'gas_price')).toBe(1_000_000_000n);
    expect(fieldOf(() => parseWei('1.5', 'max_fee_per_gas'))).toBe('max_fee_per_gas');
    expect(parseGasLimit('21000')).toBe(21000n);
    for (const bad of ['0', '-1', '1.5', '99999999999999999999'])
      expect(fieldOf(() => parseGasLimit(bad))).toBe('gas_limit');
  });
  it('converts the gwei setting to wei, rounding down below a wei', () => {
    expect(gweiToWei(1.5)).toBe(1_500_000_000n);
    expect(gweiToWei(100)).toBe(100_000_000_000n);
    expect(gweiToWei(0)).toBe(0n);
  });
});
