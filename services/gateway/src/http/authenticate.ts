import type { RequestHandler } from 'express';
import { type Principal, bearerToken } from '@custos/auth';
import { PermissionDeniedError, UnauthenticatedError } from '@custos/service-kit';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** The verified caller, set by `authenticate` on routes that are not public. */
      principal?: Principal;
    }
  }
}

/** Verifies a bearer token to a principal, or throws UnauthenticatedError. */
export interface PrincipalVerifier {
  verify(token: string): Promise<Principal>;
}

/** Requires a valid, unrevoked bearer JWT and attaches the principal (spec §5.1). */
export function authenticate(verifier: PrincipalVerifier): RequestHandler {
  return (req, _res, next) => {
    const token = bearerToken(req.header('authorization'));
    if (!token) return next(new UnauthenticatedError('missing bearer token'));
    verifier.verify(token).then(
      (principal) => {
        req.principal = principal;
        next();
      },
      (err: unknown) => next(err),
    );
  };
}

/** Refuses agents on the human-only routes of spec §5.8 (403). Runs after `authenticate`. */
export const humanOnly: RequestHandler = (req, _res, next) => {
  if (req.principal?.kind !== 'user')
    return next(new PermissionDeniedError('this operation is for humans only; agents are refused'));
  next();
};
