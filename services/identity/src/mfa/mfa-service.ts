import { randomBytes } from 'node:crypto';
import { type Principal, requireHuman } from '@custos/auth';
import { ConflictError, CustosError, InvalidArgumentError, UnauthenticatedError } from '@custos/service-kit';
import { auditOf } from '@custos/events';
import { audit, auditRefusal } from '../audit/identity-audit.js';
import { parseSecretToken, secretMatches } from '../credentials/secret-token-fns.js';
import {
  TOTP_SECRET_BYTES,
  base32Encode,
  findRecoveryCode,
  generateRecoveryCodes,
  otpauthUri,
} from '../credentials/totp-fns.js';
import type { TokenSetView } from '../users/user-types.js';
import { MFA_DISABLE_PURPOSE, MFA_ENROL_PURPOSE } from '../account/account-fns.js';
import { MFA_TOKEN_PREFIX } from './mfa-challenges.js';
import {
  MFA_FAILURE_LIMIT,
  MFA_FAILURE_WINDOW_SECONDS,
  RECOVERY_CODE_COUNT,
  TOTP_ISSUER,
  classifyCode,
  matchSealedTotp,
  sealTotpSecret,
  isLegacySealed,
  resealLegacyTotpSecret,
} from './mfa-fns.js';
import type { MfaStore, MfaTx } from './mfa-store.js';
import type { MatchedFactor, MfaSessionStarter, StepUpChecker, TotpState } from './mfa-types.js';

const CHALLENGE_FAILED = 'invalid or expired MFA token';
const CODE_FAILED = 'invalid MFA code';

/** Settings of the MFA rules. */
export interface MfaServiceOptions {
  /** Key that seals TOTP secrets at rest (MFA_SECRET_KEY). */
  kek: Buffer;
}

/** Throws a 400 naming `field` unless `value` is a non-empty string. */
function required(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.trim() === '')
    throw new InvalidArgumentError(field, `${field} is required`);
  return value;
}

/**
 * TOTP enrolment, the second step of a password sign-in, status and removal (DECISIONS.md "MFA").
 * A TOTP step is accepted at most once per user, a recovery code once, a challenge once and for at
 * most MFA_MAX_ATTEMPTS codes; every "once" is a single conditional UPDATE.
 */
export class MfaService {
  constructor(
    private readonly store: MfaStore,
    private readonly sessions: MfaSessionStarter,
    private readonly opts: MfaServiceOptions,
    private readonly stepUp: StepUpChecker,
  ) {}

  /**
   * Re-seals under the MFA key every TOTP secret still sealed under the token-signing KEK (format 1,
   * from before MFA_SECRET_KEY existed); runs at start. A secret that does not open is left alone and
   * counted (its user re-enrols).
   */
  async resealLegacy(legacyKek: Buffer): Promise<{ resealed: number; unreadable: number }> {
    let resealed = 0;
    let unreadable = 0;
    for (const row of await this.store.sealedInFormat(1)) {
      const move = (v: Buffer | null) =>
        v && isLegacySealed(v) ? resealLegacyTotpSecret(v, legacyKek, this.opts.kek, row.userId) : v;
      try {
        await this.store.replaceSealed(row.userId, row, {
          secretEnc: move(row.secretEnc),
          pendingSecretEnc: move(row.pendingSecretEnc),
        });
        resealed++;
      } catch {
        unreadable++;
      }
    }
    return { resealed, unreadable };
  }

  /**
   * Creates (or replaces) the pending secret; 409 when TOTP is already on. The secret is bound to
   * the account here (it is shown only here), so this is where the step-up `security.mfa.enrol` is
   * checked; verify-setup needs a code of this secret, which only its holder has.
   */
  async setup(p: Principal, credential: unknown): Promise<{ secret: string; otpauthUri: string }> {
    const state = await this.state(p);
    if (state.enabled) throw new ConflictError('MFA is already enabled');
    await this.stepUp.confirmStepUp(p, MFA_ENROL_PURPOSE, credential);
    const secret = randomBytes(TOTP_SECRET_BYTES);
    try {
      const sealed = sealTotpSecret(secret, this.opts.kek, state.userId);
      if (!(await this.store.setPendingSecret(state.userId, sealed)))
        throw new ConflictError('MFA is already enabled');
      const secretBase32 = base32Encode(secret);
      return {
        secret: secretBase32,
        otpauthUri: otpauthUri({ issuer: TOTP_ISSUER, account: state.email, secretBase32 }),
      };
    } finally {
      secret.fill(0);
    }
  }

  /** Confirms a code of the pending secret, turns TOTP on and returns the recovery codes (once). */
  async verifySetup(p: Principal, code: unknown): Promise<{ recoveryCodes: string[] }> {
    const typed = required(code, 'code');
    const state = await this.state(p);
    if (state.enabled) throw new ConflictError('MFA is already enabled');
    if (!state.pendingSecretEnc) throw new ConflictError('no MFA setup is pending; start with setup');
    const pending = state.pendingSecretEnc;
    const step = this.checkTotp(pending, state.userId, typed, undefined);
    if (step === undefined) throw new InvalidArgumentError('code', 'code does not match the pending secret');
    const recovery = generateRecoveryCodes(RECOVERY_CODE_COUNT);
    await this.store.transaction(async (tx) => {
      if (!(await this.store.enableTotp(state.userId, pending, step, tx)))
        throw new ConflictError('MFA setup changed meanwhile; start again');
      await this.store.replaceRecoveryCodes(state.userId, recovery.hashes, tx);
      await audit(
        tx,
        auditOf(
          p,
          'mfa.enabled',
          { type: 'user', id: state.userId },
          { factor: 'totp', recovery_code_count: recovery.codes.length },
        ),
      );
    });
    return { recoveryCodes: recovery.codes };
  }

  /** Completes a password sign-in with a TOTP or recovery code; 401 for every refusal. */
  async verify(mfaToken: unknown, code: unknown): Promise<TokenSetView> {
    const token = required(mfaToken, 'mfa_token');
    const typed = required(code, 'code');
    const parsed = parseSecretToken(token, MFA_TOKEN_PREFIX);
    if (!parsed) throw new UnauthenticatedError(CHALLENGE_FAILED);
    const challenge = await this.store.findChallenge(parsed.id);
    if (!challenge || !secretMatches(parsed.secret, challenge.secretHash))
      throw new UnauthenticatedError(CHALLENGE_FAILED);
    const userId = challenge.userId;
    const state = await this.store.totpState(userId);
    await this.countAttempt(challenge.id, userId, state);

    const factor = state?.enabled ? await this.match(state, typed) : undefined;
    if (!factor) {
      if (state) await this.auditMfaFailed(state, 'invalid_code');
      throw new UnauthenticatedError(CODE_FAILED);
    }
    await this.store.transaction(async (tx) => {
      // The user's row is locked first, as in countAttempt: the same lock order cannot deadlock.
      await this.store.lockUser(userId, tx);
      // Of concurrent submissions exactly one marks the challenge used; the factor is spent in the
      // same transaction, so a factor that was spent meanwhile rolls the challenge back.
      if (!(await this.store.consumeChallenge(challenge.id, tx)))
        throw new UnauthenticatedError(CHALLENGE_FAILED);
      if (!(await this.spend(userId, factor, tx))) throw new UnauthenticatedError(CODE_FAILED);
    });
    return this.sessions.completeMfaLogin(userId, ['pwd', factor.kind]);
  }

  /** Whether TOTP is on and how many recovery codes are left. */
  async status(p: Principal): Promise<{ enabled: boolean; recoveryCodesRemaining: number }> {
    const state = await this.state(p);
    if (!state.enabled) return { enabled: false, recoveryCodesRemaining: 0 };
    return { enabled: true, recoveryCodesRemaining: await this.store.countUnusedRecoveryCodes(state.userId) };
  }

  /** Turns TOTP off after a TOTP or recovery code; the secret, recovery codes and challenges go. */
  async disable(p: Principal, code: unknown, credential: unknown): Promise<void> {
    const typed = required(code, 'code');
    const state = await this.state(p);
    if (!state.enabled) throw new ConflictError('MFA is not enabled');
    await this.stepUp.confirmStepUp(p, MFA_DISABLE_PURPOSE, credential);
    const factor = await this.match(state, typed);
    if (!factor) throw new InvalidArgumentError('code', 'code is not a valid TOTP or recovery code');
    await this.store.transaction(async (tx) => {
      await this.store.lockUser(state.userId, tx);
      if (!(await this.spend(state.userId, factor, tx)))
        throw new InvalidArgumentError('code', 'code is not a valid TOTP or recovery code');
      await this.store.disableTotp(state.userId, tx);
      await audit(
        tx,
        auditOf(p, 'mfa.disabled', { type: 'user', id: state.userId }, { factor: factor.kind }),
      );
    });
  }

  private async state(p: Principal): Promise<TotpState> {
    requireHuman(p, 'use MFA');
    const state = await this.store.totpState(p.userId);
    if (!state) throw new UnauthenticatedError();
    return state;
  }

  /**
   * Counts one attempt on the challenge, under a lock on the user so the per-user limit over all
   * challenges holds under concurrency too.
   */
  private async countAttempt(
    challengeId: string,
    userId: string,
    state: TotpState | undefined,
  ): Promise<void> {
    const outcome = await this.store.transaction(async (tx) => {
      await this.store.lockUser(userId, tx);
      const since = new Date(Date.now() - MFA_FAILURE_WINDOW_SECONDS * 1000);
      if ((await this.store.recentFailedAttempts(userId, since, tx)) >= MFA_FAILURE_LIMIT) return 'locked';
      return (await this.store.countAttempt(challengeId, tx)) ? 'counted' : 'dead';
    });
    if (outcome === 'dead') throw new UnauthenticatedError(CHALLENGE_FAILED);
    if (outcome === 'locked') {
      if (state) await this.auditMfaFailed(state, 'locked');
      throw new CustosError('rate_limited', {
        detail: 'too many invalid MFA codes; try again later',
        extensions: { retry_after: String(MFA_FAILURE_WINDOW_SECONDS) },
      });
    }
  }

  /** Records a refused second step of a sign-in (the caller is refused either way). */
  private auditMfaFailed(state: TotpState, reason: 'invalid_code' | 'locked'): Promise<void> {
    return auditRefusal(this.store, {
      orgId: state.orgId,
      actorType: 'anonymous',
      actorId: null,
      action: 'auth.mfa_failed',
      resourceType: 'user',
      resourceId: state.userId,
      metadata: { reason },
    });
  }

  /** The factor a typed code matches (not yet spent), or undefined. */
  private async match(state: TotpState, typed: string): Promise<MatchedFactor | undefined> {
    const c = classifyCode(typed);
    if (c.kind === 'otp') {
      if (!state.secretEnc) return undefined;
      const step = this.checkTotp(state.secretEnc, state.userId, c.code, state.lastStep ?? undefined);
      return step === undefined ? undefined : { kind: 'otp', step };
    }
    const hashes = await this.store.unusedRecoveryHashes(state.userId);
    const i = findRecoveryCode(c.code, hashes);
    return i < 0 ? undefined : { kind: 'recovery', codeHash: hashes[i]! };
  }

  /** The step a code matches under a sealed secret, never one at or before `lastStep`. */
  private checkTotp(sealed: Buffer, userId: string, code: string, lastStep: number | undefined) {
    return matchSealedTotp(sealed, this.opts.kek, userId, code, lastStep);
  }

  /** Spends a matched factor once; false when a concurrent request spent it first. */
  private spend(userId: string, factor: MatchedFactor, tx: MfaTx): Promise<boolean> {
    return factor.kind === 'otp'
      ? this.store.advanceTotpStep(userId, factor.step, tx)
      : this.store.useRecoveryCode(userId, factor.codeHash, tx);
  }
}
