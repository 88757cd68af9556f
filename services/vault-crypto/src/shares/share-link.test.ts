import { randomBytes } from 'node:crypto';
import { linkSecretHash, linkSecretMatches } from './share-service';

describe('share link secrets', () => {
  it('matches only the secret whose SHA-256 is stored; a share without a hash never opens', () => {
    const secret = randomBytes(32).toString('base64url');
    const hash = linkSecretHash(secret);
    expect(hash).toHaveLength(32);
    expect(linkSecretMatches(secret, hash)).toBe(true);
    expect(linkSecretMatches(randomBytes(32).toString('base64url'), hash)).toBe(false);
    expect(linkSecretMatches(`${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`, hash)).toBe(false);
    expect(linkSecretMatches('', hash)).toBe(false);
    expect(linkSecretMatches(secret, null)).toBe(false);
    expect(linkSecretMatches('', null)).toBe(false);
    expect(linkSecretMatches(secret, hash.subarray(0, 16))).toBe(false);
  });
});
