import { type KeyObject, createHash, createPrivateKey, createPublicKey, sign } from 'node:crypto';
import fs from 'node:fs';

/** The grant type of an RFC 8693 token exchange. */
export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
/** Subject (and issued) token type of a JWT. */
export const JWT_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:jwt';
/** Subject token type of an `ocv_` agent key (the reference's vendor URN, kept for compatibility). */
export const API_KEY_TOKEN_TYPE = 'urn:1claw:params:oauth:token-type:api-key';
/** A federated token lives at most an hour (DECISIONS.md "Identity and tokens"). */
export const MAX_FEDERATED_TTL_SECONDS = 3600;

/** The RSA key that signs federated tokens, with its RFC 7638 key id and public JWK. */
export interface FederationKey {
  kid: string;
  privateKey: KeyObject;
  publicJwk: Record<string, string>;
}

/** The RFC 7638 thumbprint (SHA-256, base64url) of an RSA public JWK: the members e, kty, n in order. */
export function rsaThumbprint(jwk: { e: string; n: string }): string {
  const canonical = JSON.stringify({ e: jwk.e, kty: 'RSA', n: jwk.n });
  return createHash('sha256').update(canonical).digest('base64url');
}

/** Parses a PEM RSA private key (PKCS#1 or PKCS#8); throws when it is not RSA or shorter than 2048 bits. */
export function federationKeyFromPem(pem: string): FederationKey {
  const privateKey = createPrivateKey({ key: pem, format: 'pem' });
  if (privateKey.asymmetricKeyType !== 'rsa')
    throw new Error('the federation signing key must be an RSA key');
  const bits = privateKey.asymmetricKeyDetails?.modulusLength ?? 0;
  if (bits < 2048) throw new Error('the federation signing key must have at least 2048 bits');
  const jwk = createPublicKey(privateKey).export({ format: 'jwk' }) as { e: string; n: string };
  const kid = rsaThumbprint(jwk);
  return { kid, privateKey, publicJwk: { kty: 'RSA', n: jwk.n, e: jwk.e, kid, alg: 'RS256', use: 'sig' } };
}

/**
 * The federation key of the configuration, or undefined when none is set (the endpoint then
 * answers 503). A key that is set but unreadable stops the service at start.
 */
export function loadFederationKey(c: {
  FEDERATION_RS256_PRIVATE_KEY_FILE?: string | undefined;
  FEDERATION_RS256_PRIVATE_KEY?: string | undefined;
}): FederationKey | undefined {
  const pem = c.FEDERATION_RS256_PRIVATE_KEY_FILE
    ? fs.readFileSync(c.FEDERATION_RS256_PRIVATE_KEY_FILE, 'utf8')
    : c.FEDERATION_RS256_PRIVATE_KEY;
  return pem ? federationKeyFromPem(pem) : undefined;
}

/** A compact RS256 JWS of the claims, with `kid` in the header. */
export function signRs256(claims: Record<string, unknown>, key: FederationKey): string {
  const header = Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: key.kid })).toString(
    'base64url',
  );
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  const signature = sign('sha256', Buffer.from(`${header}.${payload}`), key.privateKey).toString('base64url');
  return `${header}.${payload}.${signature}`;
}

/**
 * The scopes a federated token gets: all of `held` when nothing is requested, else the requested
 * ones, each of which must be one of `held` exactly (a request can only narrow). Returns the
 * scopes, or the first requested scope that would widen.
 */
export function narrowScopes(
  held: readonly string[],
  requested: string,
): { ok: true; scopes: string[] } | { ok: false; widening: string } {
  const wanted = [...new Set(requested.split(' ').filter(Boolean))];
  if (wanted.length === 0) return { ok: true, scopes: [...held] };
  const widening = wanted.find((s) => !held.includes(s));
  return widening === undefined ? { ok: true, scopes: wanted } : { ok: false, widening };
}
