import { createHash, type KeyObject, type webcrypto } from 'node:crypto';
import { decodeProtectedHeader, errors as joseErrors, jwtVerify } from 'jose';
import type { JwksSource } from './cached-jwks.js';
import { principalFromClaims } from './claims-fns.js';
import { ExpiringLru } from '@custos/service-kit';
import type { Principal } from './principal-types.js';
import { InvalidTokenError, type TokenRejectionReason } from './token-errors.js';

/** Options of a TokenVerifier. */
export interface TokenVerifierOptions {
  keys: JwksSource;
  /** Accepted `iss` values: the canonical issuer first, then legacy issuers that still validate. */
  issuers: string[];
  /** The `aud` every access token must name. */
  audience: string;
  /** Leeway for `exp`, `nbf` and `iat`, in seconds. Default 5. */
  clockToleranceSeconds?: number;
  /** Consulted on every verify, cached or not, with the `kid` that signed it; true refuses the token. */
  isRevoked?: (principal: Principal, kid: string) => Promise<boolean>;
  /** How many verified tokens are remembered (LRU); 0 disables the cache. Default 10,000. */
  cacheSize?: number;
  /** Longer strings are refused before any parsing. Default 8 KiB. */
  maxTokenLength?: number;
  /** The clock, in milliseconds since the epoch. */
  now?: () => number;
}

type VerificationKey = webcrypto.CryptoKey | KeyObject;

interface CachedVerification {
  principal: Principal;
  kid: string;
  key: VerificationKey;
}

// A verified token is remembered at most this long, so a dropped key stops working soon after.
const CACHE_MAX_AGE_MS = 60_000;
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

function reasonOf(err: unknown): TokenRejectionReason {
  if (err instanceof InvalidTokenError) return err.reason;
  if (err instanceof joseErrors.JWTExpired) return 'expired';
  if (err instanceof joseErrors.JWTClaimValidationFailed) {
    if (err.claim === 'nbf' && err.reason === 'check_failed') return 'not_yet_valid';
    if (err.claim === 'iss') return 'wrong_issuer';
    if (err.claim === 'aud') return 'wrong_audience';
    return 'invalid_claims';
  }
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) return 'bad_signature';
  if (err instanceof joseErrors.JOSEAlgNotAllowed) return 'unsupported_alg';
  return 'malformed';
}

/**
 * Verifies Custos access JWTs (EdDSA, signed by identity) and maps them to a Principal. Every
 * refusal is an InvalidTokenError: a 401 with a generic detail, its `reason` for logs only.
 */
export class TokenVerifier {
  private readonly toleranceSeconds: number;
  private readonly maxTokenLength: number;
  private readonly now: () => number;
  private readonly cache: ExpiringLru<CachedVerification>;

  constructor(private readonly options: TokenVerifierOptions) {
    if (options.issuers.length === 0) throw new TypeError('TokenVerifier needs at least one issuer');
    if (!options.audience) throw new TypeError('TokenVerifier needs an audience');
    this.toleranceSeconds = options.clockToleranceSeconds ?? 5;
    this.maxTokenLength = options.maxTokenLength ?? 8192;
    this.now = options.now ?? Date.now;
    this.cache = new ExpiringLru(options.cacheSize ?? 10_000);
  }

  /** The principal of a valid, unrevoked access token; throws InvalidTokenError otherwise. */
  async verify(token: string): Promise<Principal> {
    if (typeof token !== 'string' || token.length > this.maxTokenLength || !COMPACT_JWS.test(token)) {
      throw new InvalidTokenError('malformed');
    }
    const { principal, kid } = await this.verifySignedClaims(token);
    if (this.options.isRevoked && (await this.options.isRevoked(principal, kid))) {
      throw new InvalidTokenError('revoked');
    }
    return principal;
  }

  private async verifySignedClaims(token: string): Promise<{ principal: Principal; kid: string }> {
    const cacheKey = createHash('sha256').update(token).digest('base64url');
    const cached = this.cache.get(cacheKey, this.now());
    // A cached verification stands only while the key that checked it is still published.
    if (cached && (await this.options.keys.getKey(cached.kid)) === cached.key)
      return { principal: cached.principal, kid: cached.kid };
    this.cache.delete(cacheKey);

    const { kid, key } = await this.keyFor(token);
    let principal: Principal;
    try {
      const nowMs = this.now();
      const { payload } = await jwtVerify(token, key, {
        algorithms: ['EdDSA'],
        issuer: this.options.issuers,
        audience: this.options.audience,
        clockTolerance: this.toleranceSeconds,
        requiredClaims: ['exp', 'iat', 'jti', 'sub', 'org'],
        currentDate: new Date(nowMs),
      });
      principal = principalFromClaims(payload, Math.floor(nowMs / 1000), this.toleranceSeconds);
    } catch (err) {
      throw new InvalidTokenError(reasonOf(err));
    }
    const expiresAtMs = Math.min(principal.expiresAt * 1000, this.now() + CACHE_MAX_AGE_MS);
    this.cache.set(cacheKey, { principal, kid, key }, expiresAtMs);
    return { principal, kid };
  }

  // Only the header is trusted here, and only to pick a key: the signature check follows.
  private async keyFor(token: string): Promise<{ kid: string; key: VerificationKey }> {
    let header: ReturnType<typeof decodeProtectedHeader>;
    try {
      header = decodeProtectedHeader(token);
    } catch {
      throw new InvalidTokenError('malformed');
    }
    if (header.alg !== 'EdDSA') throw new InvalidTokenError('unsupported_alg');
    if (header.typ !== undefined && header.typ !== 'JWT') throw new InvalidTokenError('malformed');
    const { kid } = header;
    if (typeof kid !== 'string' || kid.length === 0) throw new InvalidTokenError('missing_kid');
    const key = await this.options.keys.getKey(kid);
    if (!key) throw new InvalidTokenError('unknown_kid');
    return { kid, key };
  }
}
