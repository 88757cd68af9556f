import { Metadata } from '@grpc/grpc-js';
import type { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import {
  UnauthenticatedError,
  callUnary,
  currentRequestContext,
  describeError,
  type Logger,
} from '@custos/service-kit';
import { bearerToken } from './bearer-fns.js';
import { CachedJwks } from './cached-jwks.js';
import type { Principal } from './principal-types.js';
import { type RedisLike, redisRevocationCheck } from './revocation.js';
import { TokenVerifier } from './token-verifier.js';

/** What the identity service's GetJwks RPC answers (its HTTP-free shape). */
export interface IdentityJwksAnswer {
  jwksJson: string;
  issuers: string[];
  audience: string;
  activeKid: string;
}

interface KeySet {
  jwks: { keys: Array<{ kid: string; x: string; kty: string; [member: string]: unknown }> };
  issuers: string[];
  audience: string;
  activeKid: string;
  fetchedAt: number;
}

const TTL_MS = 5 * 60 * 1000;

/**
 * The identity service's public keys and token settings as every other service sees them: fetched
 * over gRPC (`fetchJwks` calls IdentityService.GetJwks), cached five minutes (spec §8), refreshed
 * early when a token names an unknown key. Serves the JWKS documents and verifies bearer tokens
 * (signature, claims, then revocation in Redis).
 */
export class IdentityKeys {
  private latest: KeySet | undefined;
  private verifier: TokenVerifier | undefined;
  private verifierFor = '';
  private readonly cache: CachedJwks;

  constructor(
    private readonly fetchJwks: () => Promise<IdentityJwksAnswer>,
    private readonly redis: RedisLike,
    private readonly logger: Logger,
  ) {
    this.cache = new CachedJwks({
      fetchJwks: async () => (await this.fetch()).jwks,
      ttlMs: TTL_MS,
      onFetchError: (err) => this.logger.warn({ err: describeError(err) }, 'JWKS fetch from identity failed'),
    });
  }

  /** Keys fetched from the identity service over gRPC. */
  static overGrpc(identity: IdentityServiceClient, redis: RedisLike, logger: Logger): IdentityKeys {
    return new IdentityKeys(() => callUnary(identity, identity.getJwks, {}, new Metadata()), redis, logger);
  }

  private async fetch(): Promise<KeySet> {
    const r = await this.fetchJwks();
    this.latest = {
      jwks: JSON.parse(r.jwksJson) as KeySet['jwks'],
      issuers: r.issuers,
      audience: r.audience,
      activeKid: r.activeKid,
      fetchedAt: Date.now(),
    };
    return this.latest;
  }

  private inflight: Promise<KeySet> | undefined;
  private lastAttempt = 0;

  /**
   * Issuers, audience and keys, refreshed after five minutes. One fetch at a time is shared by all
   * callers, attempts are at least 5 s apart, and while identity cannot be reached the last good
   * answer keeps serving (for up to an hour) so that authentication does not fail with it.
   */
  async settings(): Promise<KeySet> {
    const now = Date.now();
    const latest = this.latest;
    if (latest && now - latest.fetchedAt < TTL_MS) return latest;
    if (latest && now - this.lastAttempt < 5000) return latest;
    if (!this.inflight) {
      this.lastAttempt = now;
      this.inflight = this.fetch().finally(() => {
        this.inflight = undefined;
      });
    }
    try {
      return await this.inflight;
    } catch (err) {
      if (latest && now - latest.fetchedAt < 12 * TTL_MS) return latest;
      throw err;
    }
  }

  /** The public JWK Set. */
  async jwks(): Promise<KeySet['jwks']> {
    return (await this.settings()).jwks;
  }

  /** The key that signs new tokens. */
  async activeKey(): Promise<{ kid: string; x: string }> {
    const s = await this.settings();
    const k = s.jwks.keys.find((key) => key.kid === s.activeKid) ?? s.jwks.keys.at(-1);
    if (!k) throw new Error('identity published no signing key');
    return { kid: k.kid, x: k.x };
  }

  /** Verifies a bearer token; refused tokens throw a generic 401, an unreachable identity 503. */
  async verify(token: string): Promise<Principal> {
    const s = await this.settings();
    const key = `${s.issuers.join(',')}|${s.audience}`;
    if (!this.verifier || this.verifierFor !== key) {
      this.verifier = new TokenVerifier({
        keys: this.cache,
        issuers: s.issuers,
        audience: s.audience,
        isRevoked: redisRevocationCheck(this.redis),
      });
      this.verifierFor = key;
    }
    return this.verifier.verify(token);
  }
}

/**
 * The verified caller of the current request: the bearer JWT the gateway forwarded in gRPC
 * metadata, verified again here (SPEC: every service re-verifies). No token is a 401.
 */
export async function currentCaller(keys: Pick<IdentityKeys, 'verify'>): Promise<Principal> {
  const token = bearerToken(currentRequestContext()?.authorization);
  if (!token) throw new UnauthenticatedError();
  return keys.verify(token);
}
