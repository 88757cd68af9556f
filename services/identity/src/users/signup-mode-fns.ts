/** SIGNUP_MODE: who may create an account on this install. */
export type SignupMode = 'open' | 'invite' | 'closed';
/** Every SignupMode. */
export const SIGNUP_MODES = ['open', 'invite', 'closed'] as [SignupMode, ...SignupMode[]];

/** The ways an account comes to exist. */
export type AccountOrigin = 'signup' | 'google' | 'invitation';

/** Problem type of a refused account creation (403). */
export const SIGNUP_CLOSED_TYPE = 'signup_closed';

/**
 * Why a new account of `origin` is refused under `mode`, or undefined when it may be created.
 * `firstAccount`: the install has never had an account; in `invite` mode the first may sign up
 * (someone has to be able to invite the rest). `closed` refuses every new account, the first and
 * invited people included.
 */
export function signupRefusal(
  mode: SignupMode,
  origin: AccountOrigin,
  firstAccount: boolean,
): string | undefined {
  if (mode === 'open') return undefined;
  if (mode === 'closed') return 'this install accepts no new accounts (signup mode: closed)';
  if (origin === 'invitation' || firstAccount) return undefined;
  return 'new accounts on this install are by invitation only (signup mode: invite); ask an org admin to invite you';
}

/**
 * Whether a new account becomes a platform admin: the first account of an install does, unless the
 * operator named the platform admins (PLATFORM_ADMIN_EMAILS), who then are the only ones.
 */
export function becomesPlatformAdmin(firstAccount: boolean, adminEmailsConfigured: boolean): boolean {
  return firstAccount && !adminEmailsConfigured;
}
