import type { Request } from 'express';
import type { Problem } from './problem.js';

/** The header that carries a step-up credential (SPEC.md §5.9). */
export const AUTH_CONFIRM_HEADER = 'X-Auth-Confirm';

/** Problem type of a step-up challenge (401) and of a refused step-up credential (403). */
export const STEP_UP_REQUIRED = 'step_up_required';

/**
 * The purposes of the routes that need a step-up, each the purpose a `rat_` token must be bound
 * to (`POST /v1/auth/reauth {purpose}`). The owning service checks the credential again.
 */
export const STEP_UP_PURPOSES = {
  accountDelete: 'account.delete',
  emailChange: 'account.email.change',
  passwordChange: 'account.password.change',
  passwordSet: 'account.password.set',
  apiKeyCreate: 'account.api_key.create',
  mfaEnrol: 'security.mfa.enrol',
  mfaDisable: 'security.mfa.disable',
  agentKeyRotate: 'agent.key.rotate',
  agentGuardrailsEdit: 'agent.guardrails.edit',
  agentRouterKeyCreate: 'agent.router_key.create',
  memberRoleChange: 'org.member.role_change',
  orgKeyRotate: 'org.encryption_key.rotate',
  agentSigningKeyExport: 'agent.signing_key.export',
  agentSigningKeyImport: 'agent.signing_key.import',
  approvalDecide: 'approval.decide',
} as const;

/** One of the STEP_UP_PURPOSES. */
export type StepUpPurpose = (typeof STEP_UP_PURPOSES)[keyof typeof STEP_UP_PURPOSES];

/** The credentials `X-Auth-Confirm` accepts, as the challenge names them. */
export const STEP_UP_ACCEPTED = ['reauth_token', 'password', 'totp'] as const;

/** The `X-Auth-Confirm` value of a request: a `rat_` token, a password or a TOTP code; '' when absent. */
export function authConfirmOf(req: Request): string {
  return req.header(AUTH_CONFIRM_HEADER) ?? '';
}

/** The 401 challenge of a step-up route called without `X-Auth-Confirm`. */
export function stepUpChallenge(purpose: StepUpPurpose): Problem {
  return {
    type: STEP_UP_REQUIRED,
    title: 'Unauthorized',
    status: 401,
    detail:
      `this action needs a step-up: retry with ${AUTH_CONFIRM_HEADER} carrying a rat_ token for ` +
      `purpose ${purpose} (POST /v1/auth/reauth), your password, or a current TOTP code`,
    purpose,
    accepted: [...STEP_UP_ACCEPTED],
  };
}

/** The OpenAPI description of `X-Auth-Confirm` on a step-up route. */
export function stepUpHeaderDescription(purpose: StepUpPurpose): string {
  return (
    `Step-up (required): a \`rat_\` token for \`${purpose}\`, the password, or a current TOTP code. ` +
    `Without it: 401 \`${STEP_UP_REQUIRED}\` naming the purpose and the accepted credentials; ` +
    `a wrong, used or expired one: 403 \`${STEP_UP_REQUIRED}\`.`
  );
}
