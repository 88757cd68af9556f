import { matchSealedTotp } from './mfa-fns.js';
import type { MfaStore, MfaTx } from './mfa-store.js';

/**
 * A TOTP code as a step-up credential (SPEC.md §5.9): accepted when current and its time step is
 * later than every step accepted before, and spent with the same conditional UPDATE as the second
 * step of a sign-in (`advanceTotpStep`), so one code works once across sign-in and step-up.
 * Recovery codes are not step-up credentials: they stand in for a lost authenticator at sign-in.
 */
export class TotpStepUpCodes {
  constructor(
    private readonly store: MfaStore,
    private readonly kek: Buffer,
  ) {}

  /** Whether the user has TOTP enabled. */
  async hasTotp(userId: string): Promise<boolean> {
    return (await this.store.totpState(userId))?.enabled === true;
  }

  /**
   * True when `code` is a current, unused TOTP code of the user; it is spent now, in `tx` when
   * given (the caller's transaction: a check under a lock must not wait for a second connection).
   */
  async spend(userId: string, code: string, tx?: MfaTx): Promise<boolean> {
    const state = await this.store.totpState(userId, tx);
    if (!state?.enabled || !state.secretEnc) return false;
    const step = matchSealedTotp(state.secretEnc, this.kek, userId, code, state.lastStep ?? undefined);
    return step !== undefined && (await this.store.advanceTotpStep(userId, step, tx));
  }
}
