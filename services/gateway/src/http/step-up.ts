import type { Request } from 'express';

/** The header that carries a step-up credential (SPEC.md §5.9). */
export const AUTH_CONFIRM_HEADER = 'X-Auth-Confirm';

/** The `X-Auth-Confirm` value of a request: a `rat_` token or a password; '' when absent. */
export function authConfirmOf(req: Request): string {
  return req.header(AUTH_CONFIRM_HEADER) ?? '';
}
