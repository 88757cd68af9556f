import {
  createPublicKey,
  randomBytes,
  verify as verifySignature,
  generateKeyPairSync,
  sign,
} from 'node:crypto';
import { type SmtpCapture } from '@custos/testing';
import { api, decodePayload } from '../src/api';
import { SERVICES, sharedMail, sharedMesh, type Mesh } from '../src/mesh';

const PASSWORD = 'Correct-Horse-9-battery';

describe('identity through the gateway: signup, e-mail verification, tokens, profile', () => {
  let mesh: Mesh;
  let smtp: SmtpCapture;
  const used: string[] = [PASSWORD];

  beforeAll(async () => {
    // E-mail verification required, as the services default to.
    mesh = await sharedMesh('strict');
    smtp = sharedMail();
  });
  afterAll(async () => {
    await mesh?.stop();
    await smtp?.close();
  });

  const newEmail = () => `user-${randomBytes(4).toString('hex')}@example.com`;

  /** Signs up, reads the verification token from the e-mail, verifies, and returns the tokens. */
  async function verifiedUser(email = newEmail()) {
    const signup = await api(mesh, 'POST', '/v1/auth/signup', {
      body: { email, password: PASSWORD, display_name: 'Ada' },
    });
    expect(signup.status).toBe(201);
    const mail = await smtp.waitForMessage((m) => m.to === email, 10000);
    const token = /token=([A-Za-z0-9_%]+)/.exec(mail.text)?.[1];
    expect(token).toBeDefined();
    const verified = await api(mesh, 'POST', '/v1/auth/verify-email', {
      body: { token: decodeURIComponent(token!) },
    });
    expect(verified.status).toBe(200);
    used.push(
      decodeURIComponent(token!),
      verified.body['access_token'] as string,
      verified.body['refresh_token'] as string,
    );
    return {
      email,
      token: decodeURIComponent(token!),
      tokens: verified.body as { access_token: string; refresh_token: string },
    };
  }

  it('signs up, sends a verification e-mail over SMTP, and refuses sign-in until it is used', async () => {
    const email = newEmail();
    const signup = await api(mesh, 'POST', '/v1/auth/signup', { body: { email, password: PASSWORD } });
    expect(signup.status).toBe(201);
    expect(signup.body).toMatchObject({ email });
    expect(signup.body).not.toHaveProperty('access_token');
    const mail = await smtp.waitForMessage((m) => m.to === email, 10000);
    expect(mail.auth).toEqual({ username: 'custos', password: 'smtp-pass' });
    expect(mail.text).toContain('https://custos.test/verify-email?token=');

    const early = await api(mesh, 'POST', '/v1/auth/token', { body: { email, password: PASSWORD } });
    expect(early.status).toBe(403);
    expect(early.body).toMatchObject({ type: 'email_not_verified', status: 403 });
  });

  it('verifies once, then signs in and answers /v1/auth/me', async () => {
    const { email, token, tokens } = await verifiedUser();
    expect(tokens).toMatchObject({ token_type: 'Bearer', expires_in: 900 });
    expect(tokens.refresh_token).toMatch(/^csr_/);
    const again = await api(mesh, 'POST', '/v1/auth/verify-email', { body: { token } });
    expect(again.status).toBe(400);
    expect(again.body).toMatchObject({ field: 'token' });

    const login = await api(mesh, 'POST', '/v1/auth/token', {
      body: { email: email.toUpperCase(), password: PASSWORD },
    });
    expect(login.status).toBe(200);
    const access = login.body['access_token'] as string;
    used.push(access, login.body['refresh_token'] as string);
    const claims = decodePayload(access);
    expect(claims).toMatchObject({ role: 'owner', token_use: 'access', aud: 'custos-api' });
    expect(claims['sub']).toMatch(/^user:[0-9a-f-]{36}$/);
    expect((claims['exp'] as number) - (claims['iat'] as number)).toBe(900);

    const me = await api(mesh, 'GET', '/v1/auth/me', { token: access });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({
      email,
      role: 'owner',
      email_verified: true,
      display_name: 'Ada',
      totp_enabled: false,
    });
    expect(me.body['org_id']).toBe(claims['org']);
  });

  it('answers every sign-in failure with the same 401, whether or not the e-mail exists', async () => {
    const { email } = await verifiedUser();
    const wrong = await api(mesh, 'POST', '/v1/auth/token', { body: { email, password: `${PASSWORD}x` } });
    const unknown = await api(mesh, 'POST', '/v1/auth/token', {
      body: { email: newEmail(), password: PASSWORD },
    });
    const empty = await api(mesh, 'POST', '/v1/auth/token', { body: {} });
    for (const r of [wrong, unknown, empty]) {
      expect(r.status).toBe(401);
      expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    }
    expect(unknown.body).toEqual(wrong.body);
  });

  it('refuses bad signups with 400 naming the field, and a taken e-mail with 409', async () => {
    const weak = await api(mesh, 'POST', '/v1/auth/signup', {
      body: { email: newEmail(), password: 'short' },
    });
    expect(weak.status).toBe(400);
    expect(weak.body).toMatchObject({ field: 'password' });
    const noDigit = await api(mesh, 'POST', '/v1/auth/signup', {
      body: { email: newEmail(), password: 'No-digits-here-at-all' },
    });
    expect(noDigit.body).toMatchObject({ field: 'password' });
    const badEmail = await api(mesh, 'POST', '/v1/auth/signup', {
      body: { email: 'not-an-email', password: PASSWORD },
    });
    expect(badEmail.body).toMatchObject({ status: 400, field: 'email' });
    const wrongType = await api(mesh, 'POST', '/v1/auth/signup', { body: { email: 42, password: PASSWORD } });
    expect(wrongType.body).toMatchObject({ status: 400, field: 'email' });
    const notObject = await api(mesh, 'POST', '/v1/auth/signup', { raw: '[1,2]' });
    expect(notObject.body).toMatchObject({ status: 400, field: 'body' });

    const email = newEmail();
    expect((await api(mesh, 'POST', '/v1/auth/signup', { body: { email, password: PASSWORD } })).status).toBe(
      201,
    );
    const taken = await api(mesh, 'POST', '/v1/auth/signup', {
      body: { email: email.toUpperCase(), password: PASSWORD },
    });
    expect(taken.status).toBe(409);
    expect(taken.body).toMatchObject({ field: 'email' });
  });

  it('updates the profile and refuses a wrongly typed field', async () => {
    const { tokens } = await verifiedUser();
    const ok = await api(mesh, 'PATCH', '/v1/auth/me', {
      token: tokens.access_token,
      body: { display_name: 'Grace', marketing_emails: true },
    });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ display_name: 'Grace', marketing_emails: true });
    const bad = await api(mesh, 'PATCH', '/v1/auth/me', {
      token: tokens.access_token,
      body: { marketing_emails: 'yes' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ field: 'marketing_emails' });
  });

  it('rotates refresh tokens; reusing an old one revokes the whole session at once', async () => {
    const { tokens } = await verifiedUser();
    const first = await api(mesh, 'POST', '/v1/auth/refresh', {
      body: { refresh_token: tokens.refresh_token },
    });
    expect(first.status).toBe(200);
    const next = first.body as { access_token: string; refresh_token: string };
    used.push(next.access_token, next.refresh_token);
    expect(next.refresh_token).not.toBe(tokens.refresh_token);
    expect((await api(mesh, 'GET', '/v1/auth/me', { token: next.access_token })).status).toBe(200);

    const replay = await api(mesh, 'POST', '/v1/auth/refresh', {
      body: { refresh_token: tokens.refresh_token },
    });
    expect(replay.status).toBe(401);
    // The family is revoked: the rotated refresh token and the session's access tokens die too.
    expect(
      (await api(mesh, 'POST', '/v1/auth/refresh', { body: { refresh_token: next.refresh_token } })).status,
    ).toBe(401);
    expect((await api(mesh, 'GET', '/v1/auth/me', { token: next.access_token })).status).toBe(401);
    expect((await api(mesh, 'GET', '/v1/auth/me', { token: tokens.access_token })).status).toBe(401);
  });

  it('lets exactly one of many parallel refreshes of one token succeed, then ends the session', async () => {
    const { tokens } = await verifiedUser();
    const results = await Promise.all(
      Array.from({ length: 12 }, () =>
        api(mesh, 'POST', '/v1/auth/refresh', { body: { refresh_token: tokens.refresh_token } }),
      ),
    );
    const winners = results.filter((r) => r.status === 200);
    expect(winners).toHaveLength(1);
    expect(results.filter((r) => r.status === 401)).toHaveLength(11);
    // The other presentations were reuse: the whole session, the winner's tokens included, is over.
    const won = winners[0]!.body as { access_token: string; refresh_token: string };
    used.push(won.access_token, won.refresh_token);
    expect(
      (await api(mesh, 'POST', '/v1/auth/refresh', { body: { refresh_token: won.refresh_token } })).status,
    ).toBe(401);
    expect((await api(mesh, 'GET', '/v1/auth/me', { token: won.access_token })).status).toBe(401);
  });

  it('stops a token everywhere at once on DELETE /v1/auth/token', async () => {
    const { tokens } = await verifiedUser();
    expect((await api(mesh, 'GET', '/v1/auth/me', { token: tokens.access_token })).status).toBe(200);
    expect((await api(mesh, 'DELETE', '/v1/auth/token', { token: tokens.access_token })).status).toBe(204);
    const after = await api(mesh, 'GET', '/v1/auth/me', { token: tokens.access_token });
    expect(after.status).toBe(401);
    expect(
      (await api(mesh, 'POST', '/v1/auth/refresh', { body: { refresh_token: tokens.refresh_token } })).status,
    ).toBe(401);
    expect((await api(mesh, 'DELETE', '/v1/auth/token', {})).status).toBe(401);
  });

  it('publishes the keys: JWKS (cached 5 minutes), the raw public key and OIDC discovery', async () => {
    const { tokens } = await verifiedUser();
    const jwks = await api(mesh, 'GET', '/.well-known/jwks.json');
    expect(jwks.status).toBe(200);
    expect(jwks.headers.get('cache-control')).toBe('public, max-age=300');
    const keys = (jwks.body['keys'] as Array<Record<string, string>>) ?? [];
    const kid = JSON.parse(Buffer.from(tokens.access_token.split('.')[0]!, 'base64url').toString())
      .kid as string;
    const jwk = keys.find((k) => k['kid'] === kid);
    expect(jwk).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' });
    expect(jwk).not.toHaveProperty('d');

    const pk = await api(mesh, 'GET', '/v1/auth/jwt-public-key');
    expect(pk.body).toMatchObject({ alg: 'EdDSA' });
    const raw = Buffer.from(pk.body['public_key_base64'] as string, 'base64');
    expect(raw).toHaveLength(32);
    const key = createPublicKey({
      key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') },
      format: 'jwk',
    });
    const [h, p, s] = tokens.access_token.split('.');
    expect(verifySignature(null, Buffer.from(`${h}.${p}`), key, Buffer.from(s!, 'base64url'))).toBe(true);

    const oidc = await api(mesh, 'GET', '/.well-known/openid-configuration');
    expect(oidc.body).toMatchObject({
      issuer: 'http://127.0.0.1:8080',
      jwks_uri: 'http://127.0.0.1:8080/.well-known/jwks.json',
      id_token_signing_alg_values_supported: ['EdDSA', 'RS256'],
    });
  });

  it('refuses forged and malformed bearer tokens on protected routes', async () => {
    const { tokens } = await verifiedUser();
    const [h, p, s] = tokens.access_token.split('.') as [string, string, string];
    const claims = decodePayload(tokens.access_token);
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const header = JSON.parse(Buffer.from(h, 'base64url').toString()) as Record<string, unknown>;
    const other = generateKeyPairSync('ed25519').privateKey;
    const forgedBody = `${h}.${b64({ ...claims, role: 'owner', sub: 'user:00000000-0000-4000-8000-000000000000' })}`;
    const corpus = [
      `${b64({ alg: 'none', typ: 'JWT' })}.${p}.`,
      `${h}.${b64({ ...claims, exp: 1 })}.${s}`,
      `${forgedBody}.${sign(null, Buffer.from(forgedBody), other).toString('base64url')}`,
      `${b64({ ...header, kid: 'unknown-kid' })}.${p}.${s}`,
      `${h}.${p}.${s.slice(0, -4)}`,
      'not-a-jwt',
      '',
    ];
    for (const bad of corpus) {
      const r = await api(mesh, 'GET', '/v1/auth/me', { token: bad });
      expect(r.status).toBe(401);
      expect(r.body).toMatchObject({ status: 401, title: 'Unauthorized' });
    }
    expect((await api(mesh, 'GET', '/v1/auth/me')).status).toBe(401);
  });

  it('never writes a password, token or code into any service log', async () => {
    await new Promise((r) => setTimeout(r, 300));
    const logs = [...SERVICES].flatMap((svc) => mesh.output.get(svc) ?? []).join('\n');
    expect(logs.length).toBeGreaterThan(0);
    for (const secret of used.filter((u) => u && u.length > 8)) expect(logs).not.toContain(secret);
  });
});
