import { UnavailableError, UnauthenticatedError } from '@custos/service-kit';
import type { LoginResult } from '../mfa/mfa-types.js';
import { defaultOrgName, normalizeEmail } from '../users/user-fns.js';
import type { AccountGate } from '../users/account-gate.js';
import type { UserStore } from '../users/user-store.js';
import type { User } from '../users/user-types.js';
import { GOOGLE_REFUSED, type GoogleIdTokenVerifier } from './google-id-token.js';
import type { GoogleStore } from './google-store.js';

/** What Google sign-in needs of the user rules: a session, or the MFA challenge for TOTP users. */
export interface SignInStarter {
  signInVerifiedUser(userId: string, amr: string[]): Promise<LoginResult>;
}

const AMR = ['google'];

/**
 * `POST /v1/auth/google`: a verified Google ID token signs in the account with that e-mail, or
 * creates one (a new org, its owner, no password) on first use.
 */
export class GoogleSignInService {
  constructor(
    private readonly verifier: GoogleIdTokenVerifier | undefined,
    private readonly users: UserStore,
    private readonly store: GoogleStore,
    private readonly sessions: SignInStarter,
    private readonly gate: Pick<AccountGate, 'precheck' | 'admit' | 'settle'>,
  ) {}

  /** Verifies the ID token and signs its user in. */
  async signIn(idToken: string): Promise<LoginResult> {
    if (!this.verifier) throw new UnavailableError('Google sign-in is not configured');
    const identity = await this.verifier.verify(idToken);
    let email: string;
    try {
      email = normalizeEmail(identity.email);
    } catch {
      throw new UnauthenticatedError(GOOGLE_REFUSED);
    }
    const user = (await this.users.findByEmail(email)) ?? (await this.create(email, identity.name));
    if (!user.emailVerified) await this.store.claimUnverified(user.id);
    return this.sessions.signInVerifiedUser(user.id, AMR);
  }

  private async create(email: string, name: string): Promise<User> {
    // Google's name is a courtesy: cut to the profile's limit, control characters dropped.
    // eslint-disable-next-line no-control-regex
    const printable = name.replace(/[\u0000-\u001f\u007f]/g, '');
    const displayName = printable.trim().slice(0, 100);
    // SIGNUP_MODE decides whether Google sign-in may create the account (403 signup_closed).
    await this.gate.precheck('google');
    await this.store.createGoogleUser(
      { email, displayName, orgName: defaultOrgName(email, displayName) },
      this.gate,
    );
    // Created now, or by a parallel first sign-in of the same person: either way it exists.
    const user = await this.users.findByEmail(email);
    if (!user) throw new UnauthenticatedError(GOOGLE_REFUSED);
    return user;
  }
}
