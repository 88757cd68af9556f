import { newTokenId, signJwt } from './signing-key-fns.js';
import type { SigningKeyRing } from './signing-key-store.js';

/** Settings every minted access token shares. */
export interface TokenSettings {
  /** Canonical issuer first; legacy issuers after it still validate. */
  issuers: string[];
  audience: string;
  userAccessTtlSeconds: number;
  /** Lower-cased e-mail addresses of the platform admins (PLATFORM_ADMIN_EMAILS). */
  platformAdminEmails?: readonly string[];
}

/** A signed access token and what the caller reports about it. */
export interface MintedAccessToken {
  token: string;
  jti: string;
  expiresIn: number;
}

/** What an agent token says about its agent (spec §5.3). */
export interface AgentTokenSubject {
  id: string;
  /** The API key exchanged for this token; carried as `sid` so revoking the key ends the token. */
  keyId: string;
  orgId: string;
  createdBy: string;
  scopes: string[];
  vaultIds: string[];
  intentsApiEnabled: boolean;
  proxyEnabled: boolean;
  proxyConfig: Record<string, unknown> | null;
  environment: string;
  ttlSeconds: number;
  /** Set for a token minted from a router key (spec §5.4): its `router_key` claim. */
  routerKey?: { id: string; maxConcurrentStreams: number | null; spendCapMicroUsd: number | null };
}

/** The audience of a token re-signed for one service behind the gateway: `<audience>:<service>`. */
export function serviceAudience(audience: string, service: string): string {
  return `${audience}:${service}`;
}

/** Mints access JWTs with the ring's active key (claims per DECISIONS.md "Identity and tokens"). */
export class TokenIssuer {
  constructor(
    private readonly ring: SigningKeyRing,
    readonly settings: TokenSettings,
  ) {}

  /**
   * Whether a user is a platform admin: an address of PLATFORM_ADMIN_EMAILS, or the stored flag of
   * the install's first account (SIGNUP_MODE).
   */
  isPlatformAdmin(who: { email: string; platformAdmin?: boolean }): boolean {
    if (who.platformAdmin) return true;
    return this.settings.platformAdminEmails?.includes(who.email.toLowerCase()) ?? false;
  }

  /**
   * An access token for a user of an org, bound to a session (refresh-token family); the caller
   * says whether the user is a platform admin (`platform_admin: true` then).
   */
  userAccessToken(
    user: {
      id: string;
      orgId: string;
      role: string;
      platformAdmin?: boolean;
      requirePasskeyForVaults?: boolean;
    },
    session: { id: string; amr: string[] },
    ttlSeconds = this.settings.userAccessTtlSeconds,
  ): MintedAccessToken {
    const now = Math.floor(Date.now() / 1000);
    const jti = newTokenId();
    const ttl = Math.min(ttlSeconds, this.settings.userAccessTtlSeconds);
    const { kid, privateKey } = this.ring.active();
    const token = signJwt(
      {
        iss: this.settings.issuers[0],
        aud: this.settings.audience,
        sub: `user:${user.id}`,
        org: user.orgId,
        role: user.role,
        ...(user.platformAdmin ? { platform_admin: true } : {}),
        ...(user.requirePasskeyForVaults ? { pkv: true } : {}),
        token_use: 'access',
        sid: session.id,
        amr: session.amr,
        jti,
        iat: now,
        exp: now + ttl,
      },
      privateKey,
      kid,
    );
    return { token, jti, expiresIn: ttl };
  }

  /**
   * The claims of an access token identity has just verified (signature, claims, revocation),
   * re-signed with the active key for one service: only `aud` changes, to `<audience>:<service>`.
   * The same jti, sid, sub and exp make every revocation of the original end this one too.
   */
  serviceAccessToken(
    verifiedClaims: Record<string, unknown>,
    service: string,
  ): { token: string; expiresAt: number } {
    const exp = verifiedClaims['exp'];
    if (typeof exp !== 'number') throw new TypeError('a verified access token has a numeric exp');
    const { kid, privateKey } = this.ring.active();
    const claims = { ...verifiedClaims, aud: serviceAudience(this.settings.audience, service) };
    return { token: signJwt(claims, privateKey, kid), expiresAt: exp };
  }

  /** An access token for an agent; optional claims appear only when they are true or set. */
  agentAccessToken(agent: AgentTokenSubject): MintedAccessToken {
    const now = Math.floor(Date.now() / 1000);
    const jti = newTokenId();
    const { kid, privateKey } = this.ring.active();
    const token = signJwt(
      {
        iss: this.settings.issuers[0],
        aud: this.settings.audience,
        sub: `agent:${agent.id}`,
        org: agent.orgId,
        scopes: agent.scopes,
        vault_ids: agent.vaultIds,
        token_use: 'access',
        environment: agent.environment,
        created_by: agent.createdBy,
        sid: agent.keyId,
        ...(agent.intentsApiEnabled ? { intents_api_enabled: true } : {}),
        ...(agent.proxyEnabled ? { proxy_enabled: true, proxy_config: agent.proxyConfig ?? {} } : {}),
        ...(agent.routerKey
          ? {
              router_key: {
                id: agent.routerKey.id,
                ...(agent.routerKey.maxConcurrentStreams !== null
                  ? { max_concurrent_streams: agent.routerKey.maxConcurrentStreams }
                  : {}),
                ...(agent.routerKey.spendCapMicroUsd !== null
                  ? { spend_cap_micro_usd: agent.routerKey.spendCapMicroUsd }
                  : {}),
              },
            }
          : {}),
        jti,
        iat: now,
        exp: now + agent.ttlSeconds,
      },
      privateKey,
      kid,
    );
    return { token, jti, expiresIn: agent.ttlSeconds };
  }
}
