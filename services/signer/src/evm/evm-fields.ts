import { InvalidArgumentError } from '@custos/service-kit';
import { getAddress } from 'ethers';

/** The largest amount an EVM word holds (2^256 - 1). */
export const MAX_UINT256 = (1n << 256n) - 1n;

// Longest text read as an amount: 2^256 - 1 is 78 decimal digits; a few more for "0x" and a point.
const MAX_AMOUNT_CHARS = 100;
const HEX_WEI = /^0x[0-9a-fA-F]+$/;
const DEC_WEI = /^[0-9]+$/;
const DEC_MAJOR = /^([0-9]+)\.([0-9]+)$/;

/**
 * A transaction value as DECISIONS.md reads it: a `0x` hex string or a decimal integer string is
 * wei; a decimal with a fractional part (`"0.01"`) is the chain's major unit (ETH), with at most
 * `decimals` fractional digits. Anything else, a negative number or more than 2^256 - 1 wei is a
 * 400 naming `field`.
 */
export function parseEvmValue(raw: string, decimals: number, field = 'value'): bigint {
  const s = raw;
  if (s.length === 0 || s.length > MAX_AMOUNT_CHARS) {
    throw new InvalidArgumentError(
      field,
      'must be wei (0x hex or a decimal integer) or a decimal amount of the native unit',
    );
  }
  let wei: bigint;
  if (HEX_WEI.test(s) || DEC_WEI.test(s)) {
    wei = BigInt(s);
  } else {
    const m = DEC_MAJOR.exec(s);
    if (!m) {
      throw new InvalidArgumentError(
        field,
        'must be wei (0x hex or a decimal integer) or a decimal amount of the native unit (e.g. "0.01")',
      );
    }
    const [, whole, frac] = m as unknown as [string, string, string];
    const fracDigits = frac.replace(/0+$/, '');
    if (fracDigits.length > decimals) {
      throw new InvalidArgumentError(field, `has more than the native unit's ${decimals} decimals`);
    }
    wei = BigInt(whole) * 10n ** BigInt(decimals) + BigInt(fracDigits.padEnd(decimals, '0') || '0');
  }
  if (wei > MAX_UINT256) throw new InvalidArgumentError(field, 'is more than 2^256 - 1 wei');
  return wei;
}

/** An amount in wei (fees): a `0x` hex string or a decimal integer string, at most 2^256 - 1. */
export function parseWei(raw: string, field: string): bigint {
  if (raw.length === 0 || raw.length > MAX_AMOUNT_CHARS || !(HEX_WEI.test(raw) || DEC_WEI.test(raw))) {
    throw new InvalidArgumentError(field, 'must be an amount in wei: 0x hex or a decimal integer');
  }
  const wei = BigInt(raw);
  if (wei > MAX_UINT256) throw new InvalidArgumentError(field, 'is more than 2^256 - 1 wei');
  return wei;
}

/**
 * An EVM address: 0x and 40 hex digits, all lower-case or EIP-55 checksummed (a mixed-case address
 * whose checksum is wrong is refused: it is likely mistyped). Returns the checksummed form.
 */
export function parseEvmAddress(raw: string, field = 'to'): string {
  if (!/^0x[0-9a-fA-F]{40}$/.test(raw)) {
    throw new InvalidArgumentError(field, 'must be a 0x-prefixed 20-byte hex address');
  }
  const checksummed = getAddress(raw.toLowerCase());
  const body = raw.slice(2);
  if (body !== body.toLowerCase() && raw !== checksummed) {
    throw new InvalidArgumentError(
      field,
      'has a wrong EIP-55 checksum (send it checksummed or all lower-case)',
    );
  }
  return checksummed;
}

/** Calldata: `0x` and an even number of hex digits (`0x` or empty: none); lower-cased. */
export function parseEvmData(raw: string, field = 'data'): string {
  if (raw === '' || raw === '0x') return '0x';
  if (!/^0x(?:[0-9a-fA-F]{2})+$/.test(raw)) {
    throw new InvalidArgumentError(field, 'must be 0x-prefixed hex with an even number of digits');
  }
  return raw.toLowerCase();
}

/** A gas limit: a positive integer (decimal string or number as text). */
export function parseGasLimit(raw: string, field = 'gas_limit'): bigint {
  if (!DEC_WEI.test(raw) || raw.length > 20)
    throw new InvalidArgumentError(field, 'must be a positive integer');
  const g = BigInt(raw);
  if (g <= 0n || g > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new InvalidArgumentError(field, 'must be a positive integer');
  }
  return g;
}

/** 1 gwei in wei. */
export const GWEI = 1_000_000_000n;

/** An agent's `max_fee_per_gas_gwei` setting (a decimal number of gwei) in wei, rounded down. */
export function gweiToWei(gwei: number): bigint {
  if (!Number.isFinite(gwei) || gwei < 0) return 0n;
  const [whole = '0', frac = ''] = gwei.toFixed(9).split('.');
  return BigInt(whole) * GWEI + BigInt(frac.padEnd(9, '0').slice(0, 9));
}
