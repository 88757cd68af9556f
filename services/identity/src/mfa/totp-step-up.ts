import { base32Encode, verifyTotp } from '../credentials/totp-fns.js';
import { classifyCode, openTotpSecret } from './mfa-fns.js';
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
    const c = classifyCode(code);
    if (c.kind !== 'otp') return false;
    const state = await this.store.totpState(userId, tx);
    if (!state?.enabled || !state.secretEnc) return false;
    const secret = openTotpSecret(state.secretEnc, this.kek, userId);
    let step: number | undefined;
    try {
      step = verifyTotp(base32Encode(secret), c.code, Date.now(), state.lastStep ?? undefined);
    } finally {
      secret.fill(0);
    }
    return step !== undefined && (await this.store.advanceTotpStep(userId, step, tx));
  }
}
