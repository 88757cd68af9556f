import { UnauthenticatedError } from '@custos/service-kit';

/** Why a token was refused; for logs and tests only, never for the response. */
export type TokenRejectionReason =
  | 'malformed'
  | 'unsupported_alg'
  | 'missing_kid'
  | 'unknown_kid'
  | 'bad_signature'
  | 'expired'
  | 'not_yet_valid'
  | 'issued_in_future'
  | 'wrong_issuer'
  | 'wrong_audience'
  | 'wrong_token_use'
  | 'invalid_claims'
  | 'revoked';

/** The generic detail every refused token is answered with, so a caller cannot probe the checks. */
export const INVALID_TOKEN_DETAIL = 'invalid or expired token';

/** A refused bearer token: answered as a generic 401, with the precise `reason` kept for logging. */
export class InvalidTokenError extends UnauthenticatedError {
  constructor(readonly reason: TokenRejectionReason) {
    super(INVALID_TOKEN_DETAIL);
  }
}
