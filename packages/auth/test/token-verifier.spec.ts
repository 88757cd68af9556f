import { randomBytes } from 'node:crypto';
import { UnauthenticatedError } from '@custos/service-kit';
import type { JWK } from 'jose';
import {
  CachedJwks,
  InvalidTokenError,
  TokenVerifier,
  type Principal,
  type TokenRejectionReason,
  type TokenVerifierOptions,
} from '../src/index.js';
import {
  AGENT_ID,
  AUDIENCE,
  FakeClock,
  ISSUER,
  LEGACY_ISSUER,
  ORG_ID,
  USER_ID,
  VAULT_ID,
  agentClaims,
  ed25519Key,
  mint,
  signEd25519,
  signHs256,
  signRs256,
  unsigned,
  userClaims,
  type SigningKey,
} from './fixtures/tokens.js';

interface Setup {
  clock: FakeClock;
  key: SigningKey;
  published: JWK[];
  fetches: () => number;
  verifier: TokenVerifier;
}

function setup(opts: Partial<TokenVerifierOptions> & { ttlMs?: number } = {}): Setup {
  const clock = new FakeClock();
  const key = ed25519Key();
  const published: JWK[] = [key.jwk];
  let fetches = 0;
  const keys = new CachedJwks({
    fetchJwks: async () => {
      fetches++;
      return { keys: [...published] };
    },
    ttlMs: opts.ttlMs ?? 300_000,
    minRefreshIntervalMs: 1_000,
    now: clock.now,
  });
  const verifier = new TokenVerifier({
    keys,
    issuers: [ISSUER, LEGACY_ISSUER],
    audience: AUDIENCE,
    now: clock.now,
    ...opts,
  });
  return { clock, key, published, fetches: () => fetches, verifier };
}

async function refusal(verifier: TokenVerifier, token: string): Promise<InvalidTokenError> {
  const err: unknown = await verifier.verify(token).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(UnauthenticatedError);
  expect(err).toBeInstanceOf(InvalidTokenError);
  const e = err as InvalidTokenError;
  // What reaches the caller never says which check failed.
  expect(e.detail).toBe('invalid or expired token');
  expect(e.message).toBe('invalid or expired token');
  expect(e.httpStatus).toBe(401);
  expect(e.extensions).toEqual({});
  return e;
}

async function expectRefused(verifier: TokenVerifier, token: string, reason: TokenRejectionReason) {
  expect((await refusal(verifier, token)).reason).toBe(reason);
}

describe('TokenVerifier: valid tokens', () => {
  it('maps a user access token to a user principal', async () => {
    const { clock, key, verifier } = setup();
    const claims = userClaims(clock.seconds, { role: 'admin', platform_admin: true });
    const principal = await verifier.verify(mint(key, claims));
    expect(principal).toEqual({
      kind: 'user',
      userId: USER_ID,
      orgId: ORG_ID,
      role: 'admin',
      platformAdmin: true,
      requirePasskeyForVaults: false,
      amr: ['pwd', 'otp'],
      sessionId: 'a7c4e1d2-0000-4000-8000-000000000001',
      tokenId: claims.jti,
      issuedAt: clock.seconds,
      expiresAt: clock.seconds + 900,
      issuer: ISSUER,
    });
    expect(principal).not.toHaveProperty('token');
  });

  it('maps an agent access token, optional claims included, to an agent principal', async () => {
    const { clock, key, verifier } = setup();
    const claims = agentClaims(clock.seconds, {
      intents_api_enabled: true,
      proxy_enabled: true,
      environment: 'production',
      proxy_config: { upstreams: ['openai'], limits: { rpm: 60 } },
      router_key: { id: 'rk_1', max_concurrent_streams: 4, spend_cap_micro_usd: 5_000_000 },
      created_by: USER_ID,
      exp: clock.seconds + 60,
    });
    const principal = await verifier.verify(mint(key, claims));
    expect(principal).toEqual({
      kind: 'agent',
      agentId: AGENT_ID,
      orgId: ORG_ID,
      scopes: ['secrets:read', 'sign'],
      vaultIds: [VAULT_ID],
      intentsApiEnabled: true,
      proxyEnabled: true,
      environment: 'production',
      proxyConfig: { upstreams: ['openai'], limits: { rpm: 60 } },
      routerKey: { id: 'rk_1', maxConcurrentStreams: 4, spendCapMicroUsd: 5_000_000 },
      createdBy: USER_ID,
      tokenId: claims.jti,
      issuedAt: clock.seconds,
      expiresAt: clock.seconds + 60,
      issuer: ISSUER,
    });
  });

  it('accepts an agent token with empty scopes and vault_ids, and an aud array naming us', async () => {
    const { clock, key, verifier } = setup();
    const token = mint(
      key,
      agentClaims(clock.seconds, { scopes: [], vault_ids: [], aud: ['other', AUDIENCE] }),
    );
    expect(await verifier.verify(token)).toMatchObject({ kind: 'agent', scopes: [], vaultIds: [] });
  });

  it('accepts a token minted by a legacy issuer and refuses an unknown issuer', async () => {
    const { clock, key, verifier } = setup();
    const legacy = await verifier.verify(mint(key, userClaims(clock.seconds, { iss: LEGACY_ISSUER })));
    expect(legacy.issuer).toBe(LEGACY_ISSUER);
    await expectRefused(
      verifier,
      mint(key, userClaims(clock.seconds, { iss: 'https://evil.example' })),
      'wrong_issuer',
    );
  });

  it('returns a principal its caller cannot alter', async () => {
    const { clock, key, verifier } = setup();
    const p = await verifier.verify(mint(key, agentClaims(clock.seconds, { proxy_config: { a: { b: 1 } } })));
    if (p.kind !== 'agent') throw new Error('expected an agent');
    expect(Object.isFrozen(p)).toBe(true);
    expect(Object.isFrozen(p.scopes)).toBe(true);
    expect(Object.isFrozen(p.proxyConfig?.a)).toBe(true);
  });
});

describe('TokenVerifier: the bad-token corpus', () => {
  const s = setup();
  const now = s.clock.seconds;
  const valid = mint(s.key, userClaims(now));
  const [validHeader, validPayload, validSignature] = valid.split('.') as [string, string, string];
  const rawPublicKey = Buffer.from(s.key.jwk.x as string, 'base64url');
  const spkiPem = Buffer.from(s.key.publicKey.export({ format: 'pem', type: 'spki' }) as string);
  const impostor = ed25519Key(s.key.kid);
  const attacker = ed25519Key();

  const corpus: Array<[string, () => string, TokenRejectionReason]> = [
    ['alg none, empty signature', () => unsigned({ kid: s.key.kid }, userClaims(now)), 'malformed'],
    [
      'alg none, some signature',
      () => unsigned({ kid: s.key.kid }, userClaims(now), 'AAAA'),
      'unsupported_alg',
    ],
    [
      'alg none with EdDSA-looking casing',
      () => unsigned({ alg: 'eddsa', kid: s.key.kid }, userClaims(now), 'AAAA'),
      'unsupported_alg',
    ],
    [
      'HS256 keyed with the raw Ed25519 public key',
      () => signHs256({ kid: s.key.kid }, userClaims(now), rawPublicKey),
      'unsupported_alg',
    ],
    [
      'HS256 keyed with the SPKI PEM of the public key',
      () => signHs256({ kid: s.key.kid }, userClaims(now), spkiPem),
      'unsupported_alg',
    ],
    ['RS256 signed by some RSA key', () => signRs256({ kid: s.key.kid }, userClaims(now)), 'unsupported_alg'],
    ['unknown kid', () => mint(s.key, userClaims(now), { kid: 'no-such-kid' }), 'unknown_kid'],
    ['missing kid', () => mint(s.key, userClaims(now), { kid: undefined }), 'missing_kid'],
    ['empty kid', () => mint(s.key, userClaims(now), { kid: '' }), 'missing_kid'],
    ['numeric kid', () => mint(s.key, userClaims(now), { kid: 7 }), 'missing_kid'],
    ['typ other than JWT', () => mint(s.key, userClaims(now), { typ: 'at+jwt' }), 'malformed'],
    ['kid known, signed by a different key', () => mint(impostor, userClaims(now)), 'bad_signature'],
    [
      'attacker key embedded in the header under a known kid',
      () => mint(attacker, userClaims(now), { kid: s.key.kid, jwk: attacker.jwk }),
      'bad_signature',
    ],
    ['expired', () => mint(s.key, userClaims(now - 1000, { exp: now - 60 })), 'expired'],
    ['nbf in the future', () => mint(s.key, userClaims(now, { nbf: now + 600 })), 'not_yet_valid'],
    ['iat far in the future', () => mint(s.key, userClaims(now + 3600)), 'issued_in_future'],
    ['wrong issuer', () => mint(s.key, userClaims(now, { iss: 'https://evil.example' })), 'wrong_issuer'],
    ['missing issuer', () => mint(s.key, userClaims(now, { iss: undefined })), 'wrong_issuer'],
    ['wrong audience', () => mint(s.key, userClaims(now, { aud: 'someone-else' })), 'wrong_audience'],
    ['missing audience', () => mint(s.key, userClaims(now, { aud: undefined })), 'wrong_audience'],
    [
      'tampered payload (role flipped to owner), signature kept',
      () =>
        `${validHeader}.${Buffer.from(JSON.stringify(userClaims(now, { role: 'owner' }))).toString('base64url')}.${validSignature}`,
      'bad_signature',
    ],
    [
      'truncated signature',
      () => `${validHeader}.${validPayload}.${validSignature.slice(0, -4)}`,
      'bad_signature',
    ],
    [
      'signature of another token',
      () => `${validHeader}.${validPayload}.${mint(s.key, userClaims(now)).split('.')[2]}`,
      'bad_signature',
    ],
    ['token_use refresh', () => mint(s.key, userClaims(now, { token_use: 'refresh' })), 'wrong_token_use'],
    ['token_use missing', () => mint(s.key, userClaims(now, { token_use: undefined })), 'wrong_token_use'],
    [
      'sub of another kind',
      () => mint(s.key, userClaims(now, { sub: `service:${USER_ID}` })),
      'invalid_claims',
    ],
    ['sub without a uuid', () => mint(s.key, userClaims(now, { sub: 'user:alice' })), 'invalid_claims'],
    ['bare uuid sub', () => mint(s.key, userClaims(now, { sub: USER_ID })), 'invalid_claims'],
    ['missing org', () => mint(s.key, userClaims(now, { org: undefined })), 'invalid_claims'],
    ['org not a uuid', () => mint(s.key, userClaims(now, { org: 'acme' })), 'invalid_claims'],
    ['missing jti', () => mint(s.key, userClaims(now, { jti: undefined })), 'invalid_claims'],
    ['missing exp', () => mint(s.key, userClaims(now, { exp: undefined })), 'invalid_claims'],
    ['missing iat', () => mint(s.key, userClaims(now, { iat: undefined })), 'invalid_claims'],
    ['exp as a string', () => mint(s.key, userClaims(now, { exp: String(now + 900) })), 'invalid_claims'],
    ['user role outside the enum', () => mint(s.key, userClaims(now, { role: 'root' })), 'invalid_claims'],
    ['user without a role', () => mint(s.key, userClaims(now, { role: undefined })), 'invalid_claims'],
    [
      'agent scopes not an array',
      () => mint(s.key, agentClaims(now, { scopes: 'secrets:read' })),
      'invalid_claims',
    ],
    [
      'agent scopes holding a non-string',
      () => mint(s.key, agentClaims(now, { scopes: ['a', 1] })),
      'invalid_claims',
    ],
    [
      'agent without vault_ids',
      () => mint(s.key, agentClaims(now, { vault_ids: undefined })),
      'invalid_claims',
    ],
    [
      'agent vault_ids not uuids',
      () => mint(s.key, agentClaims(now, { vault_ids: ['vault-1'] })),
      'invalid_claims',
    ],
    [
      'agent claiming platform_admin',
      () => mint(s.key, agentClaims(now, { platform_admin: true })),
      'invalid_claims',
    ],
    [
      'payload not JSON',
      () => signEd25519({ alg: 'EdDSA', kid: s.key.kid }, 'hello', s.key.privateKey),
      'malformed',
    ],
    ['empty string', () => '', 'malformed'],
    ['a.b', () => 'a.b', 'malformed'],
    ['a.b.c', () => 'a.b.c', 'malformed'],
    ['four segments', () => `${valid}.x`, 'malformed'],
    ['10 KB of junk', () => randomBytes(7680).toString('base64url'), 'malformed'],
    ['10 KB of junk shaped like a JWS', () => `${'a'.repeat(5000)}.${'b'.repeat(5000)}.c`, 'malformed'],
  ];

  it('verifies the valid token the corpus is derived from', async () => {
    await expect(s.verifier.verify(valid)).resolves.toMatchObject({ kind: 'user', userId: USER_ID });
  });

  it.each(corpus)('refuses %s', async (_name, make, reason) => {
    await expectRefused(s.verifier, make(), reason);
  });

  it('refuses what is not a string at all', async () => {
    await expectRefused(s.verifier, undefined as unknown as string, 'malformed');
  });
});

describe('TokenVerifier: key rotation', () => {
  it('verifies a token of a newly published kid, and refuses a retired kid once the cache refreshes', async () => {
    const { clock, key: oldKey, published, verifier } = setup({ ttlMs: 10_000 });
    const oldToken = mint(oldKey, userClaims(clock.seconds));
    await verifier.verify(oldToken);

    const newKey = ed25519Key();
    published.push(newKey.jwk);
    clock.advance(2_000); // past minRefreshInterval: the unknown kid triggers a refetch
    await expect(verifier.verify(mint(newKey, userClaims(clock.seconds)))).resolves.toMatchObject({
      kind: 'user',
    });
    // Both keys are published: the old token still verifies.
    await expect(verifier.verify(oldToken)).resolves.toMatchObject({ kind: 'user' });

    published.splice(0, 1); // identity retires the old key
    await expect(verifier.verify(oldToken)).resolves.toMatchObject({ kind: 'user' }); // cache not yet refreshed
    clock.advance(10_000); // the JWKS TTL passes; the verified-token cache (60 s) would still hold it
    await expectRefused(verifier, oldToken, 'unknown_kid');
    await expectRefused(verifier, mint(oldKey, userClaims(clock.seconds)), 'unknown_kid');
    await expect(verifier.verify(mint(newKey, userClaims(clock.seconds)))).resolves.toMatchObject({
      kind: 'user',
    });
  });
});

describe('TokenVerifier: verified-token cache and revocation', () => {
  it('serves a repeated token from the cache, and the revocation hook still decides every time', async () => {
    const revoked = new Set<string>();
    const seen: Principal[] = [];
    const { clock, key, verifier } = setup({
      isRevoked: async (p) => {
        seen.push(p);
        return revoked.has(p.tokenId);
      },
    });
    const claims = userClaims(clock.seconds);
    const token = mint(key, claims);
    const first = await verifier.verify(token);
    const second = await verifier.verify(token);
    expect(second).toBe(first); // same object: the cached verification
    expect(seen).toHaveLength(2);

    revoked.add(claims.jti as string);
    await expectRefused(verifier, token, 'revoked');
    expect(seen).toHaveLength(3);
  });

  it('refuses a token revoked before its first use', async () => {
    const { clock, key, verifier } = setup({ isRevoked: async () => true });
    await expectRefused(verifier, mint(key, agentClaims(clock.seconds)), 'revoked');
  });

  it('passes an error of the revocation hook through, refusing the token', async () => {
    const { clock, key, verifier } = setup({
      isRevoked: async () => {
        throw new Error('redis down');
      },
    });
    await expect(verifier.verify(mint(key, userClaims(clock.seconds)))).rejects.toThrow('redis down');
  });

  it('verifies afresh with cacheSize 0', async () => {
    const { clock, key, verifier } = setup({ cacheSize: 0 });
    const token = mint(key, userClaims(clock.seconds));
    const first = await verifier.verify(token);
    const second = await verifier.verify(token);
    expect(second).not.toBe(first);
    expect(second).toEqual(first);
  });

  it('keeps a verification at most 60 seconds', async () => {
    const { clock, key, verifier } = setup();
    const token = mint(key, userClaims(clock.seconds));
    const first = await verifier.verify(token);
    clock.advance(59_000);
    expect(await verifier.verify(token)).toBe(first);
    clock.advance(2_000);
    expect(await verifier.verify(token)).not.toBe(first);
  });

  it('does not serve a cached token past its expiry', async () => {
    const { clock, key, verifier } = setup();
    const token = mint(key, userClaims(clock.seconds, { exp: clock.seconds + 10 }));
    await verifier.verify(token);
    clock.advance(20_000); // past exp and the 5 s tolerance, well within the 60 s cache age
    await expectRefused(verifier, token, 'expired');
  });

  it('does not cache a refusal', async () => {
    const { clock, key, published, verifier } = setup({ ttlMs: 1_000 });
    const newKey = ed25519Key();
    const token = mint(newKey, userClaims(clock.seconds));
    await expectRefused(verifier, token, 'unknown_kid');
    published.push(newKey.jwk);
    clock.advance(1_000);
    await expect(verifier.verify(token)).resolves.toMatchObject({ kind: 'user' });
    expect(key.kid).not.toBe(newKey.kid);
  });
});

describe('TokenVerifier: key source outage', () => {
  it('answers 503, not 401, when no signing keys could ever be fetched', async () => {
    const clock = new FakeClock();
    const key = ed25519Key();
    const verifier = new TokenVerifier({
      keys: new CachedJwks({
        fetchJwks: async () => {
          throw new Error('identity unreachable');
        },
        now: clock.now,
      }),
      issuers: [ISSUER],
      audience: AUDIENCE,
      now: clock.now,
    });
    await expect(verifier.verify(mint(key, userClaims(clock.seconds)))).rejects.toMatchObject({
      kind: 'unavailable',
    });
  });
});
