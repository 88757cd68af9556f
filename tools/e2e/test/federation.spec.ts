import { createHmac, createPublicKey, verify } from 'node:crypto';
import { TEST_PASSWORD, api, decodePayload, quickUser } from '../src/api';
import { type GoogleIdp, newIdpKey } from '../src/google-idp';
import { sharedFederationPublicKey, sharedGoogleIdp, sharedMesh, type Mesh } from '../src/mesh';

const GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
const JWT_TYPE = 'urn:ietf:params:oauth:token-type:jwt';
const KEY_TYPE = 'urn:1claw:params:oauth:token-type:api-key';
const AUDIENCE = 'https://api.anthropic.com';
const CLIENT_ID = 'custos-e2e.apps.googleusercontent.com';

function problem(status: number) {
  return expect.objectContaining({
    type: expect.any(String),
    title: expect.any(String),
    status,
    detail: expect.any(String),
  });
}

async function form(mesh: Mesh, fields: Record<string, string>) {
  const res = await fetch(`${mesh.baseUrl}/v1/auth/federated-token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** RFC 6238 code (SHA-1, 6 digits, 30 s) of a base32 secret, as an authenticator app computes it. */
function totp(secret: string): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  const bytes: number[] = [];
  let bits = 0;
  let value = 0;
  for (const ch of secret) {
    value = ((value << 5) | alphabet.indexOf(ch)) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      bytes.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(Date.now() / 30_000)));
  const mac = createHmac('sha1', Buffer.from(bytes)).update(counter).digest();
  const offset = mac[mac.length - 1]! & 0x0f;
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000).padStart(6, '0');
}

describe('federated tokens (RFC 8693) and Google sign-in', () => {
  let mesh: Mesh;
  let idp: GoogleIdp;
  let owner: Awaited<ReturnType<typeof quickUser>>;
  let rsaPublicPem: string;

  beforeAll(async () => {
    // The default shared mesh has a federation key and trusts the Google stand-in for CLIENT_ID.
    mesh = await sharedMesh();
    rsaPublicPem = sharedFederationPublicKey();
    idp = sharedGoogleIdp(CLIENT_ID);
    owner = await quickUser(mesh);
  });
  afterAll(async () => {
    await mesh?.stop();
    await idp?.close();
  });

  async function createAgent(fields: Record<string, unknown>) {
    const r = await api(mesh, 'POST', '/v1/agents', { token: owner.token, body: { name: 'fed', ...fields } });
    expect(r.status).toBe(201);
    const id = String((r.body['agent'] as Record<string, unknown>)['id']);
    const apiKey = r.body['api_key'] as string;
    const t = await api(mesh, 'POST', '/v1/auth/agent-token', { body: { agent_id: id, api_key: apiKey } });
    expect(t.status).toBe(200);
    return { id, apiKey, jwt: t.body['access_token'] as string };
  }

  const federated = {
    federation_enabled: true,
    federation_audiences: [AUDIENCE, 'https://other.example.com'],
    scopes: ['prod/db', 'prod/api/*', 'ci/**'],
  };

  describe('federated tokens', () => {
    it('exchanges an agent JWT (JSON) for an RS256 token the JWKS key verifies', async () => {
      const agent = await createAgent(federated);
      const r = await api(mesh, 'POST', '/v1/auth/federated-token', {
        body: {
          grant_type: GRANT,
          subject_token: agent.jwt,
          subject_token_type: JWT_TYPE,
          audience: AUDIENCE,
        },
      });
      expect(r.status).toBe(200);
      expect(r.headers.get('cache-control')).toBe('no-store');
      expect(r.body).toEqual({
        access_token: expect.any(String),
        issued_token_type: JWT_TYPE,
        token_type: 'Bearer',
        expires_in: 900,
        scope: 'prod/db prod/api/* ci/**',
      });
      const token = r.body['access_token'] as string;
      const [h, p, s] = token.split('.') as [string, string, string];
      const header = JSON.parse(Buffer.from(h, 'base64url').toString()) as Record<string, unknown>;
      const claims = decodePayload(token);
      expect(header).toMatchObject({ alg: 'RS256', kid: expect.any(String) });
      expect(claims).toMatchObject({
        iss: 'http://127.0.0.1:8080',
        sub: `agent:${agent.id}`,
        aud: AUDIENCE,
        org: owner.orgId,
        scope: 'prod/db prod/api/* ci/**',
        token_use: 'federated',
        jti: expect.any(String),
      });
      expect(Number(claims['exp']) - Number(claims['iat'])).toBe(900);

      // The JWKS publishes the RSA key under that kid, beside the Ed25519 keys.
      const jwks = await api(mesh, 'GET', '/.well-known/jwks.json');
      const keys = jwks.body['keys'] as Array<Record<string, string>>;
      expect(keys.some((k) => k['kty'] === 'OKP' && k['crv'] === 'Ed25519')).toBe(true);
      const rsa = keys.find((k) => k['kid'] === header['kid'])!;
      expect(rsa).toMatchObject({ kty: 'RSA', alg: 'RS256', use: 'sig', e: 'AQAB' });
      expect(rsa).not.toHaveProperty('d');
      const published = createPublicKey({ key: rsa, format: 'jwk' });
      expect(published.export({ format: 'pem', type: 'spki' }).toString()).toBe(rsaPublicPem);
      expect(verify('sha256', Buffer.from(`${h}.${p}`), published, Buffer.from(s, 'base64url'))).toBe(true);

      // Custos's own API refuses it (another audience, token_use federated, RS256).
      const me = await api(mesh, 'GET', '/v1/agents/me', { token });
      expect(me.status).toBe(401);
      expect(me.body).toEqual(problem(401));
      // The agent's own token still works.
      expect((await api(mesh, 'GET', '/v1/agents/me', { token: agent.jwt })).status).toBe(200);
    });

    it('exchanges an ocv_ key sent as a form, narrowing the scope and honouring the agent TTL', async () => {
      const agent = await createAgent({ ...federated, federated_token_ttl_seconds: 120 });
      const r = await form(mesh, {
        grant_type: GRANT,
        subject_token: agent.apiKey,
        subject_token_type: KEY_TYPE,
        audience: 'https://other.example.com',
        scope: 'prod/db ci/**',
      });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({
        issued_token_type: JWT_TYPE,
        token_type: 'Bearer',
        expires_in: 120,
        scope: 'prod/db ci/**',
      });
      const claims = decodePayload(r.body['access_token'] as string);
      expect(claims).toMatchObject({
        aud: 'https://other.example.com',
        scope: 'prod/db ci/**',
        sub: `agent:${agent.id}`,
      });
      expect(Number(claims['exp']) - Number(claims['iat'])).toBe(120);
    });

    it('refuses bad requests with 400 naming the field', async () => {
      const agent = await createAgent(federated);
      const good = {
        grant_type: GRANT,
        subject_token: agent.jwt,
        subject_token_type: JWT_TYPE,
        audience: AUDIENCE,
      };
      const cases: Array<[Record<string, string>, string]> = [
        [{ ...good, grant_type: 'client_credentials' }, 'grant_type'],
        [{ ...good, grant_type: '' }, 'grant_type'],
        [{ ...good, subject_token_type: 'urn:ietf:params:oauth:token-type:id_token' }, 'subject_token_type'],
        [{ ...good, requested_token_type: 'urn:ietf:params:oauth:token-type:saml2' }, 'requested_token_type'],
        [{ ...good, audience: '' }, 'audience'],
        [{ ...good, subject_token: '' }, 'subject_token'],
      ];
      for (const [body, field] of cases) {
        const r = await api(mesh, 'POST', '/v1/auth/federated-token', { body });
        expect([field, r.status]).toEqual([field, 400]);
        expect(r.body).toEqual(problem(400));
        expect(String(r.body['detail'])).toContain(field);
        const f = await form(mesh, body);
        expect([field, f.status]).toEqual([field, 400]);
      }
    });

    it('refuses a bad subject token with one generic 401', async () => {
      const agent = await createAgent(federated);
      const tampered = agent.jwt.slice(0, -4) + (agent.jwt.endsWith('AAAA') ? 'BBBB' : 'AAAA');
      const wrongSecret = agent.apiKey.slice(0, -4) + (agent.apiKey.endsWith('aaaa') ? 'bbbb' : 'aaaa');
      const cases: Array<[string, string]> = [
        [tampered, JWT_TYPE],
        ['not-a-jwt', JWT_TYPE],
        [agent.apiKey, JWT_TYPE],
        [agent.jwt, KEY_TYPE],
        [wrongSecret, KEY_TYPE],
        ['ocv_nope', KEY_TYPE],
      ];
      const details = new Set<string>();
      for (const [subject_token, subject_token_type] of cases) {
        const r = await api(mesh, 'POST', '/v1/auth/federated-token', {
          body: { grant_type: GRANT, subject_token, subject_token_type, audience: AUDIENCE },
        });
        expect(r.status).toBe(401);
        expect(r.body).toEqual(problem(401));
        details.add(String(r.body['detail']));
      }
      expect(details.size).toBe(1);
    });

    it('refuses a user token, a non-federating agent, a foreign audience and a widening scope with 403', async () => {
      const plain = await createAgent({ scopes: ['prod/db'] });
      const agent = await createAgent(federated);
      const cases: Array<[Record<string, string>, RegExp]> = [
        [{ subject_token: owner.token, subject_token_type: JWT_TYPE, audience: AUDIENCE }, /agent/],
        [{ subject_token: plain.jwt, subject_token_type: JWT_TYPE, audience: AUDIENCE }, /federation/],
        [{ subject_token: plain.apiKey, subject_token_type: KEY_TYPE, audience: AUDIENCE }, /federation/],
        [
          { subject_token: agent.jwt, subject_token_type: JWT_TYPE, audience: 'https://evil.example.com' },
          /audience/,
        ],
        [{ subject_token: agent.apiKey, subject_token_type: KEY_TYPE, audience: `${AUDIENCE}/` }, /audience/],
        [
          {
            subject_token: agent.jwt,
            subject_token_type: JWT_TYPE,
            audience: AUDIENCE,
            scope: 'prod/db secret/**',
          },
          /scope/,
        ],
        [
          { subject_token: agent.apiKey, subject_token_type: KEY_TYPE, audience: AUDIENCE, scope: 'prod/**' },
          /scope/,
        ],
      ];
      for (const [fields, detail] of cases) {
        const r = await api(mesh, 'POST', '/v1/auth/federated-token', {
          body: { grant_type: GRANT, ...fields },
        });
        expect(r.status).toBe(403);
        expect(r.body).toEqual(problem(403));
        expect(String(r.body['detail'])).toMatch(detail);
      }
    });

    it('refuses the tokens of a deactivated agent', async () => {
      const agent = await createAgent(federated);
      expect((await api(mesh, 'DELETE', `/v1/agents/${agent.id}`, { token: owner.token })).status).toBe(204);
      for (const [subject_token, subject_token_type] of [
        [agent.jwt, JWT_TYPE],
        [agent.apiKey, KEY_TYPE],
      ]) {
        const r = await api(mesh, 'POST', '/v1/auth/federated-token', {
          body: { grant_type: GRANT, subject_token, subject_token_type, audience: AUDIENCE },
        });
        expect(r.status).toBe(401);
      }
    });
  });

  describe('Google sign-in', () => {
    const google = (id_token: unknown) => api(mesh, 'POST', '/v1/auth/google', { body: { id_token } });
    const newEmail = () => `g-${Math.random().toString(36).slice(2, 10)}@example.com`;

    it('creates a user (new org, owner, no password) on first sign-in, and signs the same user in later', async () => {
      const email = newEmail();
      const first = await google(idp.idToken(email));
      expect(first.status).toBe(200);
      expect(first.body).toEqual({
        access_token: expect.any(String),
        token_type: 'Bearer',
        expires_in: 900,
        refresh_token: expect.any(String),
      });
      const claims = decodePayload(first.body['access_token'] as string);
      expect(claims).toMatchObject({ role: 'owner', amr: ['google'], token_use: 'access' });
      expect(claims['org']).not.toBe(owner.orgId);
      const me = await api(mesh, 'GET', '/v1/auth/me', { token: first.body['access_token'] as string });
      expect(me.body).toMatchObject({
        email,
        auth_method: 'google',
        email_verified: true,
        display_name: 'Grace Hopper',
        role: 'owner',
      });
      // No password: password sign-in fails.
      expect(
        (await api(mesh, 'POST', '/v1/auth/token', { body: { email, password: TEST_PASSWORD } })).status,
      ).toBe(401);

      const again = await google(idp.idToken(email.toUpperCase()));
      expect(again.status).toBe(200);
      const claims2 = decodePayload(again.body['access_token'] as string);
      expect(claims2['sub']).toBe(claims['sub']);
      expect(claims2['org']).toBe(claims['org']);
    });

    it('signs an existing password user in', async () => {
      const u = await quickUser(mesh);
      const r = await google(idp.idToken(u.email));
      expect(r.status).toBe(200);
      const claims = decodePayload(r.body['access_token'] as string);
      expect(claims).toMatchObject({ sub: `user:${u.userId}`, org: u.orgId, amr: ['google'] });
      // The password still works for a verified account.
      expect(
        (await api(mesh, 'POST', '/v1/auth/token', { body: { email: u.email, password: TEST_PASSWORD } }))
          .status,
      ).toBe(200);
    });

    it('answers a user with TOTP with the MFA challenge, as password sign-in does', async () => {
      const u = await quickUser(mesh);
      const setup = await api(mesh, 'POST', '/v1/auth/mfa/setup', { confirm: TEST_PASSWORD, token: u.token });
      const secret = setup.body['secret'] as string;
      const enable = await api(mesh, 'POST', '/v1/auth/mfa/verify-setup', {
        token: u.token,
        body: { code: totp(secret) },
      });
      expect(enable.status).toBe(200);
      const r = await google(idp.idToken(u.email));
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ mfa_required: true, mfa_token: expect.any(String), expires_in: 300 });
      expect(r.body).not.toHaveProperty('access_token');
    });

    it('refuses every bad ID token with the same 401 and creates no account', async () => {
      const email = newEmail();
      const now = Math.floor(Date.now() / 1000);
      const stranger = newIdpKey();
      const cases = [
        idp.idToken(email, { aud: 'someone-else.apps.googleusercontent.com' }),
        idp.idToken(email, { iss: 'https://accounts.example.com' }),
        idp.idToken(email, { iat: now - 7200, exp: now - 3600 }),
        idp.idToken(email, { email_verified: false }),
        idp.idToken(email, { email_verified: 'true' }),
        idp.idToken(email, {}, { kid: idp.key.kid, privateKey: stranger.privateKey }),
        idp.idToken(email, {}, stranger),
        idp.idToken(email).split('.').slice(0, 2).join('.') + '.',
        'not.a.jwt',
      ];
      const bodies = new Set<string>();
      for (const token of cases) {
        const r = await google(token);
        expect(r.status).toBe(401);
        expect(r.body).toEqual(problem(401));
        bodies.add(JSON.stringify(r.body));
      }
      const empty = await google('');
      expect(empty.status).toBe(401);
      bodies.add(JSON.stringify(empty.body));
      expect(bodies.size).toBe(1);
      // Nothing was created: the address is still free for a password signup.
      const signup = await api(mesh, 'POST', '/v1/auth/signup', { body: { email, password: TEST_PASSWORD } });
      expect(signup.status).toBe(201);
    });

    it('accepts the bare issuer `accounts.google.com` too', async () => {
      const r = await google(idp.idToken(newEmail(), { iss: 'accounts.google.com' }));
      expect(r.status).toBe(200);
    });
  });
});

describe('federation and Google sign-in without configuration', () => {
  let mesh: Mesh;
  beforeAll(async () => {
    // No federation key and no Google settings, as the services default to.
    mesh = await sharedMesh('strict');
  });
  afterAll(() => mesh?.stop());

  it('answers 503 problem details, and publishes no RSA key', async () => {
    const owner = await quickUser(mesh);
    const created = await api(mesh, 'POST', '/v1/agents', {
      token: owner.token,
      body: { name: 'fed', federation_enabled: true, federation_audiences: [AUDIENCE] },
    });
    const apiKey = created.body['api_key'] as string;
    const r = await api(mesh, 'POST', '/v1/auth/federated-token', {
      body: { grant_type: GRANT, subject_token: apiKey, subject_token_type: KEY_TYPE, audience: AUDIENCE },
    });
    expect(r.status).toBe(503);
    expect(r.body).toEqual(problem(503));
    const f = await form(mesh, {
      grant_type: GRANT,
      subject_token: apiKey,
      subject_token_type: KEY_TYPE,
      audience: AUDIENCE,
    });
    expect(f.status).toBe(503);

    const g = await api(mesh, 'POST', '/v1/auth/google', { body: { id_token: 'x.y.z' } });
    expect(g.status).toBe(503);
    expect(g.body).toEqual(problem(503));
    expect(g.body['detail']).toBe('Google sign-in is not configured');

    const jwks = await api(mesh, 'GET', '/.well-known/jwks.json');
    expect((jwks.body['keys'] as Array<{ kty: string }>).every((k) => k.kty === 'OKP')).toBe(true);
  });
});
