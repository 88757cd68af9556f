import { PermissionDeniedError } from '@custos/service-kit';
import {
  type AccountOrigin,
  SIGNUP_CLOSED_TYPE,
  type SignupMode,
  becomesPlatformAdmin,
  signupRefusal,
} from './signup-mode-fns.js';
import type { UserStore } from './user-store.js';

type Tx = Parameters<Parameters<UserStore['transaction']>[0]>[0];

/** Settings of account creation. */
export interface AccountGateOptions {
  /** SIGNUP_MODE. */
  mode: SignupMode;
  /** Whether PLATFORM_ADMIN_EMAILS names anyone (then the first account is no platform admin). */
  adminEmailsConfigured: boolean;
}

/**
 * Decides whether a new account may be created (SIGNUP_MODE), for every way one is: password
 * signup, Google sign-in, an accepted invitation. `precheck` refuses early and cheaply (before a
 * password is hashed); `admit`, inside the transaction that creates the account, decides for good,
 * under a database lock, so that of parallel first signups exactly one is the install's first.
 */
export class AccountGate {
  constructor(
    private readonly users: Pick<UserStore, 'anyAccountExists' | 'markPlatformAdmin'>,
    private readonly opts: AccountGateOptions,
  ) {}

  /** Refuses (403 `signup_closed`) what `admit` would certainly refuse; reads without a lock. */
  async precheck(origin: AccountOrigin, tx?: Tx): Promise<void> {
    if (this.opts.mode === 'open') return;
    const first = this.opts.mode === 'invite' && !(await this.users.anyAccountExists(false, tx));
    this.refuseUnless(origin, first);
  }

  /**
   * Decides in `tx`, before the account is inserted: refuses (403 `signup_closed`) or answers
   * whether the account is the install's first. Call `settle` after the insert.
   */
  async admit(origin: AccountOrigin, tx: Tx): Promise<{ first: boolean }> {
    if (this.opts.mode === 'closed') this.refuseUnless(origin, false);
    // Cheap when the install has accounts (nearly always): the lock is taken only while it has none.
    let first = !(await this.users.anyAccountExists(false, tx));
    if (first) first = !(await this.users.anyAccountExists(true, tx));
    this.refuseUnless(origin, first);
    return { first };
  }

  /** After the insert in the same transaction: the install's first account becomes a platform admin. */
  async settle(userId: string, admitted: { first: boolean }, tx: Tx): Promise<boolean> {
    const admin = becomesPlatformAdmin(admitted.first, this.opts.adminEmailsConfigured);
    if (admin) await this.users.markPlatformAdmin(userId, tx);
    return admin;
  }

  private refuseUnless(origin: AccountOrigin, first: boolean): void {
    const refusal = signupRefusal(this.opts.mode, origin, first);
    if (refusal) throw new PermissionDeniedError(refusal, { type: SIGNUP_CLOSED_TYPE });
  }
}
