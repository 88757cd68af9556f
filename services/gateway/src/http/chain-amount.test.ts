import { chainAmount, safeCount } from './schemas';

describe('on-chain amounts in JSON bodies', () => {
  it('passes strings on and takes a JSON number only when it is held exactly', () => {
    expect(chainAmount.parse('0.01')).toBe('0.01');
    expect(chainAmount.parse('123456789012345678')).toBe('123456789012345678');
    expect(chainAmount.parse(21000)).toBe('21000');
    expect(chainAmount.parse(Number.MAX_SAFE_INTEGER)).toBe('9007199254740991');
    // 123456789012345678 arrives as ...680 once parsed: refused rather than signed rounded.
    expect(chainAmount.safeParse(JSON.parse('123456789012345678')).success).toBe(false);
    expect(chainAmount.safeParse(1.5).success).toBe(false);
    expect(chainAmount.safeParse(-1).success).toBe(false);
  });

  it('takes a nonce only as a whole number held exactly', () => {
    expect(safeCount.parse(7)).toBe(7);
    expect(safeCount.safeParse(2 ** 53).success).toBe(false);
    expect(safeCount.safeParse(1.5).success).toBe(false);
    expect(safeCount.safeParse(-1).success).toBe(false);
  });
});
