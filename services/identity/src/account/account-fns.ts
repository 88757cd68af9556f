import { type Principal, type UserPrincipal, requireHuman } from '@custos/auth';
import { InvalidArgumentError } from '@custos/service-kit';

/** Seconds a re-auth (`rat_`) token lives (DECISIONS.md). */
export const REAUTH_TTL_SECONDS = 300;
/** Failed password re-auths within REAUTH_FAILURE_WINDOW_MS that lock re-auth. */
export const REAUTH_MAX_FAILURES = 10;
/** The window the failures are counted in: an hour. */
export const REAUTH_FAILURE_WINDOW_MS = 3_600_000;
/** How long re-auth stays locked after the last failure that reached the limit: 15 minutes. */
export const REAUTH_LOCK_MS = 900_000;
/** Seconds a password-reset link lives. */
export const RESET_TOKEN_TTL_SECONDS = 3600;
/** Reset e-mails sent to one account per hour at most; further requests answer alike but send nothing. */
export const RESET_EMAILS_PER_HOUR = 5;
/** The phrase DELETE /v1/auth/me needs in `confirmation`, exactly. */
export const DELETE_CONFIRMATION = 'DELETE MY ACCOUNT';
/** The step-up purpose of account deletion. */
export const ACCOUNT_DELETE_PURPOSE = 'account.delete';
/** Step-up purpose of starting an e-mail change. */
export const EMAIL_CHANGE_PURPOSE = 'account.email.change';
/** Step-up purpose of changing the password. */
export const PASSWORD_CHANGE_PURPOSE = 'account.password.change';
/** Step-up purpose of setting the first password. */
export const PASSWORD_SET_PURPOSE = 'account.password.set';
/** Step-up purpose of creating a personal API key. */
export const API_KEY_CREATE_PURPOSE = 'account.api_key.create';
/** Step-up purpose of TOTP enrolment (checked where the secret is made: setup). */
export const MFA_ENROL_PURPOSE = 'security.mfa.enrol';
/** Step-up purpose of turning TOTP off. */
export const MFA_DISABLE_PURPOSE = 'security.mfa.disable';
/** Step-up purpose of editing an agent's guardrails (limits, allow-lists, screening, approvals). */
export const AGENT_GUARDRAILS_EDIT_PURPOSE = 'agent.guardrails.edit';
/** Step-up purpose of rotating an agent's key. */
export const AGENT_KEY_ROTATE_PURPOSE = 'agent.key.rotate';
/** Step-up purpose of changing a member's role. */
export const MEMBER_ROLE_CHANGE_PURPOSE = 'org.member.role_change';
/** Step-up purpose of rotating the org's key-encryption key (checked by vault-crypto through identity). */
export const ORG_KEY_ROTATE_PURPOSE = 'org.encryption_key.rotate';
/** Step-up purpose of exporting an agent's signing key (checked by signer through identity). */
export const AGENT_SIGNING_KEY_EXPORT_PURPOSE = 'agent.signing_key.export';
/** Step-up purpose of importing an agent's signing key (checked by signer through identity). */
export const AGENT_SIGNING_KEY_IMPORT_PURPOSE = 'agent.signing_key.import';
/** Days the link to undo an e-mail change stays valid (mailed to the replaced address). */
export const EMAIL_UNDO_TTL_SECONDS = 7 * 86_400;
/** Problem type of a refused or missing step-up (DECISIONS.md "Errors and limits"). */
export const STEP_UP_REQUIRED = 'step_up_required';
/** Metered features and their limit per fixed hour window (SPEC.md §2.5, §8). */
export const FEATURE_QUOTAS: Readonly<Record<string, number>> = { voice_brief: 30 };
/** Length of a feature-quota window. */
export const QUOTA_WINDOW_MS = 3_600_000;

/** The caller as a user, or a 403 for agents (every account call is a human's). */
export function requireUser(p: Principal): UserPrincipal {
  requireHuman(p, 'manage an account');
  return p;
}

// Dotted lower-case words: `account.delete`, `security.passkey.register`.
const PURPOSE = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/;

/** Validates a step-up purpose, or throws a 400 naming `purpose`. */
export function normalizePurpose(raw: unknown): string {
  if (typeof raw !== 'string' || raw === '') throw new InvalidArgumentError('purpose', 'purpose is required');
  if (raw.length > 64 || !PURPOSE.test(raw)) {
    throw new InvalidArgumentError(
      'purpose',
      'purpose must be dotted lower-case words (e.g. account.delete), at most 64 characters',
    );
  }
  return raw;
}

/**
 * Whether re-auth is locked, given the times of the failures of the last hour: it is from the
 * moment the failures reach REAUTH_MAX_FAILURES until REAUTH_LOCK_MS after the latest one.
 * Returns the milliseconds left, or 0 when it is open.
 */
export function reauthLockRemainingMs(failures: readonly Date[], nowMs: number): number {
  const recent = failures.filter((f) => f.getTime() > nowMs - REAUTH_FAILURE_WINDOW_MS);
  if (recent.length < REAUTH_MAX_FAILURES) return 0;
  const latest = Math.max(...recent.map((f) => f.getTime()));
  return Math.max(0, latest + REAUTH_LOCK_MS - nowMs);
}

/** The start of the fixed UTC hour window that contains `nowMs`. */
export function quotaWindowStart(nowMs: number): Date {
  return new Date(Math.floor(nowMs / QUOTA_WINDOW_MS) * QUOTA_WINDOW_MS);
}

/** The limit of a metered feature, or a 400 naming `feature`. */
export function featureLimit(feature: unknown): { feature: string; limit: number } {
  if (typeof feature !== 'string' || feature === '')
    throw new InvalidArgumentError('feature', 'feature is required');
  const limit = FEATURE_QUOTAS[feature];
  if (limit === undefined || !Object.hasOwn(FEATURE_QUOTAS, feature)) {
    throw new InvalidArgumentError(
      'feature',
      `feature must be one of: ${Object.keys(FEATURE_QUOTAS).join(', ')}`,
    );
  }
  return { feature, limit };
}

/**
 * The address a deleted account keeps: unique, undeliverable (`.invalid` is reserved by RFC 2606),
 * so the real address is free for a new signup at once.
 */
export function tombstoneEmail(uuid: string): string {
  return `deleted+${uuid}@invalid`;
}

/**
 * Milliseconds from `nowMs` until a token minted then is no longer covered by a subject revocation
 * made at `revokedAtMs`. The revocation is kept in whole seconds, rounded up, and tokens carry
 * `iat` in whole seconds, so a token minted later within the same second would still be refused.
 */
export function msUntilPastRevocation(revokedAtMs: number, nowMs: number): number {
  return Math.max(0, Math.ceil(revokedAtMs / 1000) * 1000 - nowMs);
}

/** How an `X-Auth-Confirm` value is read: a `rat_` token, a TOTP code, or a password. */
export type StepUpMethod = 'reauth_token' | 'totp' | 'password';

/**
 * What kind of step-up credential a value is: a `rat_` token when it parses as one, six digits
 * (spaces allowed) a TOTP code when the user has TOTP, anything else a password (no password can
 * be six digits: the policy asks at least 12 characters).
 */
export function stepUpMethodOf(credential: string, isReauthToken: boolean, hasTotp: boolean): StepUpMethod {
  if (isReauthToken) return 'reauth_token';
  if (hasTotp && /^[0-9]{6}$/.test(credential.replace(/\s/g, ''))) return 'totp';
  return 'password';
}
