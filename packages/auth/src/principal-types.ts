/** A user's role in the org the token was minted for. */
export type UserRole = 'owner' | 'admin' | 'member';

/** The router-key claim of a short-lived router-key token (SPEC.md §5.4). */
export interface RouterKeyClaim {
  readonly id: string;
  readonly maxConcurrentStreams?: number;
  readonly spendCapMicroUsd?: number;
}

/** What every verified access token says, whoever it was minted for. */
interface PrincipalBase {
  readonly orgId: string;
  /** The token's `jti`. */
  readonly tokenId: string;
  /** `iat`, in seconds since the epoch. */
  readonly issuedAt: number;
  /** `exp`, in seconds since the epoch. */
  readonly expiresAt: number;
  /** `iss`: the canonical or a legacy issuer. */
  readonly issuer: string;
  /**
   * `sid`: what the token was minted from, so it can be revoked with it — a user's session
   * (refresh-token family) or the agent API key that was exchanged.
   */
  readonly sessionId?: string;
}

/** A human signed in to an org. */
export interface UserPrincipal extends PrincipalBase {
  readonly kind: 'user';
  readonly userId: string;
  readonly role: UserRole;
  readonly platformAdmin: boolean;
  /** Authentication methods of the sign-in (`pwd`, `otp`, …); empty when the token names none. */
  readonly amr: readonly string[];
  /** `pkv`: the user's setting `require_passkey_for_vaults` (secret reads need X-Passkey-Token). */
  readonly requirePasskeyForVaults: boolean;
}

/** A software agent of an org. */
export interface AgentPrincipal extends PrincipalBase {
  readonly kind: 'agent';
  readonly agentId: string;
  readonly scopes: readonly string[];
  readonly vaultIds: readonly string[];
  readonly intentsApiEnabled: boolean;
  readonly proxyEnabled: boolean;
  readonly environment?: string;
  readonly proxyConfig?: Readonly<Record<string, unknown>>;
  readonly routerKey?: RouterKeyClaim;
  /** The user who created the agent. */
  readonly createdBy?: string;
}

/** The verified caller of a request; the raw token is deliberately not kept. */
export type Principal = UserPrincipal | AgentPrincipal;
