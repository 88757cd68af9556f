import { bearerToken } from './bearer-fns';

describe('bearerToken', () => {
  it('returns the token of a Bearer header, whatever the case of the scheme', () => {
    expect(bearerToken('Bearer abc.def.ghi')).toBe('abc.def.ghi');
    expect(bearerToken('bearer abc.def.ghi')).toBe('abc.def.ghi');
    expect(bearerToken('BEARER abc.def.ghi')).toBe('abc.def.ghi');
    expect(bearerToken('Bearer   a-b_c~d+e/f==')).toBe('a-b_c~d+e/f==');
  });

  it.each([
    ['no header', undefined],
    ['empty header', ''],
    ['scheme only', 'Bearer'],
    ['scheme and a space', 'Bearer '],
    ['two tokens', 'Bearer abc def'],
    ['another scheme', 'Basic dXNlcjpwYXNz'],
    ['scheme glued to the token', 'Bearerabc'],
    ['tab instead of space', 'Bearer\tabc'],
    ['trailing space', 'Bearer abc '],
    ['leading space', ' Bearer abc'],
    ['newline inside', 'Bearer abc\nX-Injected: 1'],
    ['characters outside b64token', 'Bearer abc,def'],
    ['padding in the middle', 'Bearer ab=c'],
  ])('refuses %s', (_name, header) => {
    expect(bearerToken(header)).toBeUndefined();
  });
});
