import { InvalidArgumentError, isUuid } from '@custos/service-kit';
import { vaultDescription, vaultName } from './vault-fns';

describe('vault names', () => {
  it('trims and keeps names of 1..255 characters', () => {
    expect(vaultName('  prod  ')).toBe('prod');
    expect(vaultName('é'.repeat(255))).toHaveLength(255);
  });
  it.each(['', '   ', 'x'.repeat(256), '__agent-keys', '__x'])('refuses %j naming name', (n) => {
    expect(() => vaultName(n)).toThrow(InvalidArgumentError);
  });
  it('caps descriptions and recognises UUIDs', () => {
    expect(() => vaultDescription('d'.repeat(1001))).toThrow(InvalidArgumentError);
    expect(() => vaultDescription('a\u0000b')).toThrow(/description must not contain NUL/);
    expect(() => vaultName('pro\u0000d')).toThrow(/name must not contain control/);
    expect(() => vaultName('line\nbreak')).toThrow(InvalidArgumentError);
    expect(isUuid('00000000-0000-4000-8000-000000000000')).toBe(true);
    expect(isUuid('1234')).toBe(false);
  });
});
