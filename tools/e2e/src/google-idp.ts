import { type KeyObject, generateKeyPairSync, randomUUID, sign } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** An RSA key with the kid it is published under. */
export interface IdpKey {
  kid: string;
  privateKey: KeyObject;
  publicJwk: Record<string, unknown>;
}

/** A new RS256 key (2048 bits) named `kid`. */
export function newIdpKey(kid = randomUUID()): IdpKey {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    kid,
    privateKey,
    publicJwk: { ...publicKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' },
  };
}

/** A compact RS256 JWT of `claims` signed by `key`, with `kid` in the header. */
export function signRs256(
  claims: Record<string, unknown>,
  key: { kid: string; privateKey: KeyObject },
): string {
  const header = Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: key.kid })).toString(
    'base64url',
  );
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  const signature = sign('sha256', Buffer.from(`${header}.${payload}`), key.privateKey).toString('base64url');
  return `${header}.${payload}.${signature}`;
}

/** A local stand-in for Google's ID-token issuer: a real JWKS endpoint and a token signer. */
export interface GoogleIdp {
  jwksUrl: string;
  key: IdpKey;
  /** Signs an ID token: Google's usual claims for `email`, overridden by `claims`. */
  idToken(
    email: string,
    claims?: Record<string, unknown>,
    key?: { kid: string; privateKey: KeyObject },
  ): string;
  close(): Promise<void>;
}

/** A GoogleIdp for `key` whose JWKS is served at `jwksUrl` (by this process or another one). */
export function googleIdpClient(
  jwksUrl: string,
  key: IdpKey,
  clientId: string,
  close: () => Promise<void> = async () => undefined,
): GoogleIdp {
  return {
    jwksUrl,
    key,
    idToken(email, claims = {}, signer = key) {
      const now = Math.floor(Date.now() / 1000);
      return signRs256(
        {
          iss: 'https://accounts.google.com',
          azp: clientId,
          aud: clientId,
          sub: String(Math.floor(Math.random() * 1e15)),
          email,
          email_verified: true,
          name: 'Grace Hopper',
          iat: now,
          exp: now + 3600,
          ...claims,
        },
        signer,
      );
    },
    close,
  };
}

/** Starts the JWKS server on 127.0.0.1 (a free port) publishing one RSA key (`key`, else a new one). */
export async function startGoogleIdp(clientId: string, key: IdpKey = newIdpKey()): Promise<GoogleIdp> {
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/oauth2/v3/certs') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: [key.publicJwk] }));
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return googleIdpClient(
    `http://127.0.0.1:${port}/oauth2/v3/certs`,
    key,
    clientId,
    () => new Promise<void>((resolve) => server.close(() => resolve())),
  );
}
