import {
  SECRET_TOKEN_PREFIXES,
  type SecretTokenPrefix,
  generateSecretToken,
  hashSecret,
  parseSecretToken,
  secretMatches,
  secretTokenPrefixOf,
} from './secret-token-fns';

const ALL = Object.values(SECRET_TOKEN_PREFIXES);

describe('generateSecretToken', () => {
  it.each(ALL)('makes %s tokens of the documented shape', (prefix) => {
    const t = generateSecretToken(prefix);
    expect(t.token.startsWith(prefix)).toBe(true);
    expect(t.token.slice(prefix.length)).toMatch(/^[0-9A-Za-z]{16}_[0-9A-Za-z]{43}$/);
    expect(t.id).toBe(t.token.slice(prefix.length, prefix.length + 16));
    expect(t.secretHash).toMatch(/^[0-9a-f]{64}$/);
    // The stored hash is of the secret, and neither it nor the id reveals the secret.
    const secret = t.token.slice(-43);
    expect(t.secretHash).toBe(hashSecret(secret));
    expect(t.secretHash).not.toContain(secret);
  });

  it('uses the documented prefixes', () => {
    expect(SECRET_TOKEN_PREFIXES).toEqual({
      personalApiKey: 'csk_',
      agentApiKey: 'ocv_',
      platformKey: 'plt_',
      routerKey: 'sk-proxy-v1-',
      reauth: 'rat_',
      refresh: 'csr_',
      email: 'cse_',
    });
  });

  it('never repeats an id or a secret', () => {
    const tokens = Array.from({ length: 2000 }, () => generateSecretToken('csk_'));
    expect(new Set(tokens.map((t) => t.id)).size).toBe(tokens.length);
    expect(new Set(tokens.map((t) => t.secretHash)).size).toBe(tokens.length);
  });

  it('draws every base62 character', () => {
    const chars = new Set(
      Array.from({ length: 200 }, () => generateSecretToken('ocv_').token.slice(4).replace('_', '')).join(''),
    );
    expect(chars.size).toBe(62);
  });

  it('refuses an unknown prefix', () => {
    expect(() => generateSecretToken('xyz_' as SecretTokenPrefix)).toThrow('unknown secret token prefix');
  });
});

describe('parseSecretToken', () => {
  it('round-trips a generated token', () => {
    const t = generateSecretToken('sk-proxy-v1-');
    const parsed = parseSecretToken(t.token, 'sk-proxy-v1-');
    expect(parsed).toEqual({ id: t.id, secret: t.token.slice(-43) });
    expect(secretMatches(parsed!.secret, t.secretHash)).toBe(true);
  });

  it('refuses another prefix, even a similar one', () => {
    const t = generateSecretToken('csk_');
    expect(parseSecretToken(t.token, 'ocv_')).toBeUndefined();
    expect(parseSecretToken(t.token.toUpperCase(), 'csk_')).toBeUndefined();
    expect(parseSecretToken(`x${t.token}`, 'csk_')).toBeUndefined();
  });

  it('refuses wrong lengths, characters and surrounding text', () => {
    const t = generateSecretToken('rat_');
    const body = t.token.slice(4);
    for (const bad of [
      `rat_${body.slice(1)}`, // id one short
      `rat_${body}x`, // secret one long
      `rat_${body.slice(0, -1)}`, // secret one short
      `rat_${body.replace('_', '-')}`,
      `rat_${body.slice(0, 5)}_${body.slice(6)}`, // `_` inside the id
      `rat_${body.slice(0, -1)}=`,
      ` ${t.token}`,
      `${t.token}\n`,
      'rat_',
      '',
    ]) {
      expect(parseSecretToken(bad, 'rat_')).toBeUndefined();
    }
    expect(parseSecretToken(undefined as unknown as string, 'rat_')).toBeUndefined();
  });
});

describe('secretMatches', () => {
  it('refuses a tampered secret and a malformed stored hash', () => {
    const t = generateSecretToken('plt_');
    const secret = t.token.slice(-43);
    const flipped = secret.slice(0, -1) + (secret.endsWith('a') ? 'b' : 'a');
    expect(secretMatches(secret, t.secretHash)).toBe(true);
    expect(secretMatches(flipped, t.secretHash)).toBe(false);
    expect(secretMatches(secret, t.secretHash.toUpperCase())).toBe(false);
    expect(secretMatches(secret, t.secretHash.slice(2))).toBe(false);
    expect(secretMatches(secret, '')).toBe(false);
  });

  it('hashes with SHA-256', () => {
    expect(hashSecret('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});

describe('secretTokenPrefixOf', () => {
  it('names the kind of a bare key', () => {
    expect(secretTokenPrefixOf(generateSecretToken('sk-proxy-v1-').token)).toBe('sk-proxy-v1-');
    expect(secretTokenPrefixOf(generateSecretToken('csk_').token)).toBe('csk_');
    expect(secretTokenPrefixOf('ghp_abc')).toBeUndefined();
  });
});
