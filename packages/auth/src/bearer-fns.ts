// RFC 6750 §2.1: `Bearer` 1*SP b64token. The scheme is case-insensitive (RFC 9110 §11.1).
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*)$/i;

/** The token of an `Authorization: Bearer <token>` header, or undefined when the header is not one. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  return BEARER.exec(header)?.[1];
}
