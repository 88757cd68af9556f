import { SECRET_TOKEN_PREFIXES, generateSecretToken } from '../credentials/secret-token-fns.js';
import { MFA_CHALLENGE_TTL_SECONDS, MFA_FAILURE_WINDOW_SECONDS } from './mfa-fns.js';
import type { MfaStore } from './mfa-store.js';
import type { MfaChallengeStarter, MfaChallengeView } from './mfa-types.js';

/**
 * The `mfa_token` is a `cse_` secret token: lookups are per table, so sharing the prefix of the
 * e-mailed tokens cannot make one kind pass for the other.
 */
export const MFA_TOKEN_PREFIX = SECRET_TOKEN_PREFIXES.email;

/** Starts the challenge a password sign-in answers with when the user has TOTP. */
export class MfaChallengeIssuer implements MfaChallengeStarter {
  constructor(private readonly store: MfaStore) {}

  /** A new single-use challenge for the user, valid MFA_CHALLENGE_TTL_SECONDS; only its hash is kept. */
  async start(userId: string): Promise<MfaChallengeView> {
    const now = Date.now();
    // Older challenges are kept while they still count towards the user's failure limit.
    await this.store.pruneChallenges(userId, new Date(now - MFA_FAILURE_WINDOW_SECONDS * 1000));
    const t = generateSecretToken(MFA_TOKEN_PREFIX);
    await this.store.insertChallenge({
      id: t.id,
      userId,
      secretHash: t.secretHash,
      expiresAt: new Date(now + MFA_CHALLENGE_TTL_SECONDS * 1000),
    });
    return { mfaToken: t.token, expiresIn: MFA_CHALLENGE_TTL_SECONDS };
  }
}
