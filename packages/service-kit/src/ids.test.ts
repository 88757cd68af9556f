import { isUuid } from './ids';

describe('isUuid', () => {
  it('accepts UUIDs in either case and nothing else', () => {
    expect(isUuid('0b0c1e6e-3f0a-4c55-9d1e-2a7f6b8e9c01')).toBe(true);
    expect(isUuid('0B0C1E6E-3F0A-4C55-9D1E-2A7F6B8E9C01')).toBe(true);
    for (const bad of [
      '',
      'x',
      '0b0c1e6e3f0a4c559d1e2a7f6b8e9c01',
      '0b0c1e6e-3f0a-4c55-9d1e-2a7f6b8e9c01\n',
      ' 0b0c1e6e-3f0a-4c55-9d1e-2a7f6b8e9c01',
    ]) {
      expect(isUuid(bad)).toBe(false);
    }
  });
});
