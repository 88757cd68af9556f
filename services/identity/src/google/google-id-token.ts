import { createRemoteJWKSet, jwtVerify } from 'jose';
import { UnauthenticatedError } from '@custos/service-kit';

/** Every refused ID token answers this, whatever the reason (signature, audience, expiry, …). */
export const GOOGLE_REFUSED = 'invalid Google ID token';

/** The identity a verified Google ID token vouches for. */
export interface GoogleIdentity {
  /** Google's stable user id (`sub`). */
  subject: string;
  email: string;
  name: string;
}

/** Settings of Google sign-in (GOOGLE_* variables). */
export interface GoogleSettings {
  clientIds: string[];
  issuers: string[];
  jwksUrl: string;
}

/**
 * Verifies Google ID tokens locally: RS256 signature against Google's published keys (fetched
 * and cached by jose, refetched when a token names an unknown key), audience = one of our client
 * ids, issuer, expiry, and `email_verified === true`.
 */
export class GoogleIdTokenVerifier {
  private readonly keys: ReturnType<typeof createRemoteJWKSet>;

  constructor(private readonly settings: GoogleSettings) {
    this.keys = createRemoteJWKSet(new URL(settings.jwksUrl), { timeoutDuration: 5000 });
  }

  /** The identity in a valid token; anything else is one generic 401. */
  async verify(idToken: string): Promise<GoogleIdentity> {
    if (!idToken) throw new UnauthenticatedError(GOOGLE_REFUSED);
    let claims: Record<string, unknown>;
    try {
      const r = await jwtVerify(idToken, this.keys, {
        algorithms: ['RS256'],
        audience: this.settings.clientIds,
        issuer: this.settings.issuers,
        requiredClaims: ['exp', 'iat', 'sub', 'email'],
        clockTolerance: 30,
      });
      claims = r.payload as Record<string, unknown>;
    } catch {
      throw new UnauthenticatedError(GOOGLE_REFUSED);
    }
    const { sub, email, name } = claims;
    if (claims['email_verified'] !== true || typeof email !== 'string' || typeof sub !== 'string')
      throw new UnauthenticatedError(GOOGLE_REFUSED);
    return { subject: sub, email, name: typeof name === 'string' ? name : '' };
  }
}
