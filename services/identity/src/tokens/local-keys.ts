import type { KeyObject } from 'node:crypto';
import type { JwksSource } from '@custos/auth';
import type { SigningKeyRing } from './signing-key-store.js';
import { publicKeyOf } from './signing-key-fns.js';

/**
 * Identity verifies tokens with its own ring: no round trip to itself. A kid is looked up in the
 * ring on every call, so a key the ring dropped (expired, revoked) stops verifying at once; only the
 * JWK → KeyObject conversion is cached.
 */
export function localKeySource(ring: SigningKeyRing): JwksSource {
  const cache = new Map<string, KeyObject>();
  return {
    async getKey(kid: string) {
      const jwk = ring.jwks().keys.find((k) => k.kid === kid);
      if (!jwk) {
        cache.delete(kid);
        return undefined;
      }
      const cached = cache.get(kid);
      if (cached) return cached;
      const key = publicKeyOf(jwk);
      cache.set(kid, key);
      return key;
    },
  };
}
