import { generateKeyPairSync, verify } from 'node:crypto';
import {
  federationKeyFromPem,
  loadFederationKey,
  narrowScopes,
  rsaThumbprint,
  signRs256,
} from './federation-fns';

describe('rsaThumbprint', () => {
  it('computes the RFC 7638 §3.1 example', () => {
    const n =
      '0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw';
    expect(rsaThumbprint({ n, e: 'AQAB' })).toBe('NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs');
  });
});

describe('federation keys', () => {
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = rsa.privateKey.export({ format: 'pem', type: 'pkcs1' }).toString();

  it('reads a PEM RSA key and publishes only its public half under the thumbprint', () => {
    const key = federationKeyFromPem(pem);
    expect(key.publicJwk).toEqual({
      kty: 'RSA',
      n: expect.any(String),
      e: 'AQAB',
      kid: key.kid,
      alg: 'RS256',
      use: 'sig',
    });
    expect(key.kid).toBe(rsaThumbprint(key.publicJwk as { n: string; e: string }));
    expect(loadFederationKey({ FEDERATION_RS256_PRIVATE_KEY: pem })?.kid).toBe(key.kid);
    expect(loadFederationKey({})).toBeUndefined();
  });

  it('refuses keys that are not RSA or too short', () => {
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({
      format: 'pem',
      type: 'pkcs8',
    });
    expect(() => federationKeyFromPem(ec.toString())).toThrow(/RSA/);
    const small = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({
      format: 'pem',
      type: 'pkcs8',
    });
    expect(() => federationKeyFromPem(small.toString())).toThrow(/2048/);
  });

  it('signs an RS256 JWT that the public key verifies', () => {
    const key = federationKeyFromPem(pem);
    const jwt = signRs256({ sub: 'agent:x' }, key);
    const [h, p, s] = jwt.split('.') as [string, string, string];
    expect(JSON.parse(Buffer.from(h, 'base64url').toString())).toEqual({
      alg: 'RS256',
      typ: 'JWT',
      kid: key.kid,
    });
    expect(verify('sha256', Buffer.from(`${h}.${p}`), rsa.publicKey, Buffer.from(s, 'base64url'))).toBe(true);
  });
});

describe('narrowScopes', () => {
  const held = ['a/b', 'c/*'];
  it('grants everything held when nothing is asked', () => {
    expect(narrowScopes(held, '')).toEqual({ ok: true, scopes: held });
    expect(narrowScopes(held, '   ')).toEqual({ ok: true, scopes: held });
  });
  it('grants a subset, once each', () => {
    expect(narrowScopes(held, 'c/*  c/*')).toEqual({ ok: true, scopes: ['c/*'] });
  });
  it('names the first scope that would widen, glob or not', () => {
    expect(narrowScopes(held, 'a/b c/**')).toEqual({ ok: false, widening: 'c/**' });
    expect(narrowScopes([], 'a/b')).toEqual({ ok: false, widening: 'a/b' });
  });
});
