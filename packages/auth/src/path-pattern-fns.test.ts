import { pathMatches, scopesCover } from './path-pattern-fns';

describe('pathMatches', () => {
  it.each([
    ['**', 'a', true],
    ['**', 'a/b/c', true],
    ['*', 'a', true],
    ['*', 'a/b', false],
    ['prod/*', 'prod/db', true],
    ['prod/*', 'prod/db/password', false],
    ['prod/**', 'prod/db/password', true],
    ['prod/**', 'prod', true],
    ['prod/**/key', 'prod/key', true],
    ['prod/**/key', 'prod/a/b/key', true],
    ['prod/**/key', 'prod/a/b/keys', false],
    ['a/*/c', 'a/b/c', true],
    ['a/*/c', 'a/c', false],
    ['db', 'db', true],
    ['db', 'dbx', false],
    ['**/**/x', 'x', true],
    ['staging/**', 'prod/x', false],
  ])('%s against %s is %s', (pattern, path, expected) => {
    expect(pathMatches(pattern, path)).toBe(expected);
  });

  it('treats glob characters inside a segment literally', () => {
    expect(pathMatches('a*', 'ab')).toBe(false);
    expect(pathMatches('a*', 'a*')).toBe(true);
  });

  it('does not blow up on many `**` segments', () => {
    const pattern = Array.from({ length: 30 }, () => '**/a').join('/') + '/b';
    const path = Array.from({ length: 40 }, () => 'a').join('/');
    expect(pathMatches(pattern, path)).toBe(false);
  });
});

describe('scopesCover', () => {
  it('covers a path only when some scope matches; no scopes cover nothing', () => {
    expect(scopesCover([], 'a')).toBe(false);
    expect(scopesCover(['x/*', 'a/**'], 'a/b')).toBe(true);
    expect(scopesCover(['x/*'], 'a/b')).toBe(false);
  });
});
