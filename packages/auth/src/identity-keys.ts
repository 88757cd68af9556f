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
import { type RedisLike, type RevocationCheckOptions, redisRevocationCheck } from './revocation.js';
import { TokenVerifier } from './token-verifier.js';

/** What the identity service's GetJwks RPC answers (its HTTP-free shape). */
export interface IdentityJwksAnswer {
  jwksJson: string;
  activeKid: string;
}

/** The issuers (canonical first) and audience a service accepts: its own configuration. */
export interface TokenTrust {
  issuers: string[];
  audience: string;
}

interface KeySet {
  jwks: { keys: Array<{ kid: string; x: string; kty: string; [member: string]: unknown }> };
  activeKid: string;
  fetchedAt: number;
}

const TTL_MS = 5 * 60 * 1000;

/**
 * The identity service's public keys as every other service sees them: fetched over mutually
 * authenticated gRPC (`fetchJwks` calls IdentityService.GetJwks), cached five minutes (spec §8),
 * refreshed early when a token names an unknown key. Issuer and audience are the service's own
 * configuration (`trust`), never identity's answer. Serves the JWKS documents and verifies bearer
 * tokens (signature, claims, then revocation — of the token, session, subject or signing key — in
 * Redis).
 */
export class IdentityKeys {
  private latest: KeySet | undefined;
  private readonly verifier: TokenVerifier;
  private readonly cache: CachedJwks;

  constructor(
    private readonly fetchJwks: () => Promise<IdentityJwksAnswer>,
    private readonly redis: RedisLike,
    private readonly logger: Logger,
    readonly trust: TokenTrust,
    revocation: RevocationCheckOptions = {},
  ) {
    this.cache = new CachedJwks({
      fetchJwks: async () => (await this.fetch()).jwks,
      ttlMs: TTL_MS,
      onFetchError: (err) => this.logger.warn({ err: describeError(err) }, 'JWKS fetch from identity failed'),
    });
    this.verifier = new TokenVerifier({
      keys: this.cache,
      issuers: trust.issuers,
      audience: trust.audience,
      isRevoked: redisRevocationCheck(this.redis, revocation),
    });
  }

  /** Keys fetched from the identity service over gRPC. */
  static overGrpc(
    identity: IdentityServiceClient,
    redis: RedisLike,
    logger: Logger,
    trust: TokenTrust,
    revocation: RevocationCheckOptions = {},
  ): IdentityKeys {
    return new IdentityKeys(
      () => callUnary(identity, identity.getJwks, {}, new Metadata()),
      redis,
      logger,
      trust,
      revocation,
    );
  }

  private async fetch(): Promise<KeySet> {
    const r = await this.fetchJwks();
    this.latest = {
      jwks: JSON.parse(r.jwksJson) as KeySet['jwks'],
      activeKid: r.activeKid,
      fetchedAt: Date.now(),
    };
    return this.latest;
  }

  private inflight: Promise<KeySet> | undefined;
  private lastAttempt = 0;

  /**
   * The keys, refreshed after five minutes. One fetch at a time is shared by all
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
