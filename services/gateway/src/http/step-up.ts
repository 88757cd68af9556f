import { Metadata } from '@grpc/grpc-js';
import type { Request, RequestHandler, Response } from 'express';
import type { AccountServiceClient } from '@custos/proto/custos/identity/v1/account';
import { CustosError, callUnary } from '@custos/service-kit';

/** The header that carries a step-up credential (SPEC.md §5.9). */
export const AUTH_CONFIRM_HEADER = 'X-Auth-Confirm';

/** The `X-Auth-Confirm` value of a request: a `rat_` token or a password; '' when absent. */
export function authConfirmOf(req: Request): string {
  return req.header(AUTH_CONFIRM_HEADER) ?? '';
}

/**
 * Sets `Retry-After` for a rate limit that identity raised (the re-auth lockout): the error handler
 * sets it only for the gateway's own limiter, and the seconds travel as `retry_after`.
 */
export function setRetryAfter(res: Response, err: unknown): void {
  if (err instanceof CustosError && err.kind === 'rate_limited') {
    const seconds = err.extensions['retry_after'];
    if (seconds && /^\d+$/.test(seconds)) res.setHeader('Retry-After', seconds);
  }
}

/**
 * Middleware factory for routes that need a fresh proof of the user (SPEC.md §5.9): it sends the
 * `X-Auth-Confirm` value to identity, which consumes a `rat_` token of `purpose` once or checks
 * the password (under the re-auth lockout). A refusal is a 403 problem with type
 * `step_up_required` and the `purpose`; a locked re-auth is a 429 with Retry-After. Put it after
 * the authentication guards, e.g.
 * `declareRoute(router, { ...guards, human: [...guards.human, requireStepUp(account, 'x.y')] }, ...)`.
 * A `rat_` token is spent here, before the handler runs: validate what can be validated earlier.
 */
export function requireStepUp(account: AccountServiceClient, purpose: string): RequestHandler {
  return (req, res, next) => {
    callUnary(
      account,
      account.confirmStepUp,
      { purpose, credential: authConfirmOf(req) },
      new Metadata(),
    ).then(
      () => next(),
      (err: unknown) => {
        setRetryAfter(res, err);
        next(err);
      },
    );
  };
}
