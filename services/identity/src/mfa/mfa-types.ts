import type { Principal } from '@custos/auth';
import type { TokenSetView } from '../users/user-types.js';

/** The second step a password sign-in answers with when the user has TOTP. */
export interface MfaChallengeView {
  /** Single-use secret token naming the challenge; only its hash is stored. */
  mfaToken: string;
  expiresIn: number;
}

/** What a password sign-in returns: tokens, or a challenge for the second factor. */
export type LoginResult =
  | { kind: 'tokens'; tokens: TokenSetView }
  | { kind: 'mfa'; challenge: MfaChallengeView };

/** Starts the MFA challenge of a password sign-in (what the user rules need of the MFA slice). */
export interface MfaChallengeStarter {
  start(userId: string): Promise<MfaChallengeView>;
}

/** Issues the session of a sign-in whose second factor was verified (what MFA needs of the user rules). */
export interface MfaSessionStarter {
  completeMfaLogin(userId: string, amr: string[]): Promise<TokenSetView>;
}

/** The TOTP state of a user as the MFA rules see it (secrets still sealed). */
export interface TotpState {
  userId: string;
  orgId: string;
  email: string;
  enabled: boolean;
  secretEnc: Buffer | null;
  pendingSecretEnc: Buffer | null;
  lastStep: number | null;
}

/** A second factor that matched, not yet consumed. */
export type MatchedFactor = { kind: 'otp'; step: number } | { kind: 'recovery'; codeHash: string };

/** Checks a step-up credential for a purpose (ReauthService): a 403 `step_up_required` when it fails. */
export interface StepUpChecker {
  confirmStepUp(p: Principal, purpose: string, credential: unknown): Promise<void>;
}
