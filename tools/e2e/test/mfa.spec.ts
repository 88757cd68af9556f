import { TEST_PASSWORD, api, decodePayload, quickUser } from '../src/api';
import { currentStep, totp } from '../src/totp';
import { SERVICES, sharedMesh, type Mesh } from '../src/mesh';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A TOTP user as the test tracks it: the secret, the recovery codes and the last step accepted. */
interface Enrolled {
  email: string;
  token: string;
  secret: string;
  recovery: string[];
  lastStep: number;
}

/**
 * A code the server has not accepted yet: the current step or, right after one was used, the next
 * one (the ±1 window accepts it at once); waits for the clock only when even that was used.
 */
async function freshCode(u: Enrolled): Promise<{ code: string; step: number }> {
  const step = Math.max(u.lastStep + 1, currentStep());
  while (currentStep() + 1 < step) await sleep(500);
  return { code: totp(u.secret, step), step };
}

/** A six-digit code that is none of the secret's codes near now. */
function wrongCode(secret: string): string {
  const near = new Set([-2, -1, 0, 1, 2].map((d) => totp(secret, currentStep() + d)));
  for (let n = 0; ; n++) {
    const c = String(n).padStart(6, '0');
    if (!near.has(c)) return c;
  }
}

describe('TOTP multi-factor authentication', () => {
  let mesh: Mesh;
  const secrets: string[] = [];

  beforeAll(async () => {
    mesh = await sharedMesh();
  });
  afterAll(() => mesh?.stop());

  /** A new user with TOTP enabled. */
  async function enrolled(): Promise<Enrolled> {
    const user = await quickUser(mesh);
    const setup = await api(mesh, 'POST', '/v1/auth/mfa/setup', {
      confirm: TEST_PASSWORD,
      token: user.token,
    });
    expect(setup.status).toBe(200);
    const secret = setup.body['secret'] as string;
    const u: Enrolled = { email: user.email, token: user.token, secret, recovery: [], lastStep: -1 };
    const c = await freshCode(u);
    const verified = await api(mesh, 'POST', '/v1/auth/mfa/verify-setup', {
      token: user.token,
      body: { code: c.code },
    });
    expect(verified.status).toBe(200);
    u.lastStep = c.step;
    u.recovery = verified.body['recovery_codes'] as string[];
    secrets.push(secret, ...u.recovery);
    return u;
  }

  /** Signs in with the password; expects the MFA challenge and returns its token. */
  async function challenge(u: { email: string }): Promise<string> {
    const r = await api(mesh, 'POST', '/v1/auth/token', {
      body: { email: u.email, password: TEST_PASSWORD },
    });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ mfa_required: true, mfa_token: expect.any(String), expires_in: 300 });
    expect(r.body['mfa_token']).toMatch(/^cse_[A-Za-z0-9]{16}_[A-Za-z0-9]{43}$/);
    secrets.push(r.body['mfa_token'] as string);
    return r.body['mfa_token'] as string;
  }

  const verify = (mfaToken: string, code: string) =>
    api(mesh, 'POST', '/v1/auth/mfa/verify', { body: { mfa_token: mfaToken, code } });
  const status = async (token: string) => (await api(mesh, 'GET', '/v1/auth/mfa/status', { token })).body;

  it('enrols: setup returns a base32 secret and otpauth URI, verify-setup enables TOTP and shows 10 recovery codes once', async () => {
    const user = await quickUser(mesh);
    expect(await status(user.token)).toEqual({ enabled: false, recovery_codes_remaining: 0 });

    const setup = await api(mesh, 'POST', '/v1/auth/mfa/setup', {
      confirm: TEST_PASSWORD,
      token: user.token,
    });
    expect(setup.status).toBe(200);
    expect(setup.headers.get('cache-control')).toBe('no-store');
    const secret = setup.body['secret'] as string;
    secrets.push(secret);
    expect(secret).toMatch(/^[A-Z2-7]{32}$/); // 20 bytes
    expect(setup.body['otpauth_uri']).toBe(
      `otpauth://totp/Custos:${encodeURIComponent(user.email)}?secret=${secret}` +
        '&issuer=Custos&algorithm=SHA1&digits=6&period=30',
    );

    // A wrong, missing or mistyped code changes nothing.
    const wrong = await api(mesh, 'POST', '/v1/auth/mfa/verify-setup', {
      token: user.token,
      body: { code: wrongCode(secret) },
    });
    expect(wrong.status).toBe(400);
    expect(wrong.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(wrong.body).toMatchObject({ status: 400, field: 'code' });
    for (const body of [{}, { code: '' }, { code: 123456 }]) {
      const r = await api(mesh, 'POST', '/v1/auth/mfa/verify-setup', { token: user.token, body });
      expect(r.body).toMatchObject({ status: 400, field: 'code' });
    }
    expect(await status(user.token)).toEqual({ enabled: false, recovery_codes_remaining: 0 });

    const step = currentStep();
    const ok = await api(mesh, 'POST', '/v1/auth/mfa/verify-setup', {
      token: user.token,
      body: { code: totp(secret, step) },
    });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('cache-control')).toBe('no-store');
    const codes = ok.body['recovery_codes'] as string[];
    secrets.push(...codes);
    expect(ok.body['enabled']).toBe(true);
    expect(codes).toHaveLength(10);
    expect(new Set(codes).size).toBe(10);
    for (const c of codes) expect(c).toMatch(/^[a-z2-9]{4}-[a-z2-9]{4}-[a-z2-9]{4}$/);

    expect(await status(user.token)).toEqual({ enabled: true, recovery_codes_remaining: 10 });
    expect((await api(mesh, 'GET', '/v1/auth/me', { token: user.token })).body['totp_enabled']).toBe(true);
    // Already enabled: no second setup, no second confirmation, no new recovery codes.
    const again = await api(mesh, 'POST', '/v1/auth/mfa/setup', {
      confirm: TEST_PASSWORD,
      token: user.token,
    });
    expect(again.body).toMatchObject({ status: 409 });
    const reconfirm = await api(mesh, 'POST', '/v1/auth/mfa/verify-setup', {
      token: user.token,
      body: { code: totp(secret, step + 1) },
    });
    expect(reconfirm.body).toMatchObject({ status: 409 });
    expect(await status(user.token)).toEqual({ enabled: true, recovery_codes_remaining: 10 });
  });

  it('refuses verify-setup before setup (409)', async () => {
    const user = await quickUser(mesh);
    const r = await api(mesh, 'POST', '/v1/auth/mfa/verify-setup', {
      token: user.token,
      body: { code: '123456' },
    });
    expect(r.body).toMatchObject({ status: 409 });
    expect(await status(user.token)).toEqual({ enabled: false, recovery_codes_remaining: 0 });
  });

  it('signs in with password then TOTP (amr pwd+otp); a used code is refused; a recovery code works once (amr pwd+recovery)', async () => {
    const u = await enrolled();
    const mfaToken = await challenge(u);
    const c = await freshCode(u);
    const signedIn = await verify(mfaToken, c.code);
    expect(signedIn.status).toBe(200);
    expect(signedIn.headers.get('cache-control')).toBe('no-store');
    expect(signedIn.body).toMatchObject({ token_type: 'Bearer', expires_in: 900 });
    const access = signedIn.body['access_token'] as string;
    const refresh = signedIn.body['refresh_token'] as string;
    secrets.push(access, refresh);
    expect(refresh).toMatch(/^csr_/);
    expect(decodePayload(access)).toMatchObject({ amr: ['pwd', 'otp'] });
    expect((await api(mesh, 'GET', '/v1/auth/me', { token: access })).body['email']).toBe(u.email);
    const refreshed = await api(mesh, 'POST', '/v1/auth/refresh', { body: { refresh_token: refresh } });
    expect(decodePayload(refreshed.body['access_token'] as string)).toMatchObject({ amr: ['pwd', 'otp'] });

    // The challenge is spent, and the step is spent: the same code fails on a new challenge too,
    // and so does the (older) code of the enrolment.
    expect((await verify(mfaToken, c.code)).status).toBe(401);
    const second = await challenge(u);
    const replay = await verify(second, c.code);
    expect(replay.status).toBe(401);
    expect(replay.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(replay.body).toMatchObject({ status: 401, detail: 'invalid MFA code' });
    expect((await verify(second, totp(u.secret, c.step - 1))).status).toBe(401);

    // The same challenge still takes a recovery code.
    const recovered = await verify(second, u.recovery[0]!);
    expect(recovered.status).toBe(200);
    expect(decodePayload(recovered.body['access_token'] as string)).toMatchObject({
      amr: ['pwd', 'recovery'],
    });
    expect(await status(u.token)).toEqual({ enabled: true, recovery_codes_remaining: 9 });
    const third = await challenge(u);
    expect((await verify(third, u.recovery[0]!)).status).toBe(401);
    // Case and hyphens do not matter when typing a code off paper.
    const typed = u.recovery[1]!.toUpperCase().replace(/-/g, '');
    expect((await verify(third, typed)).status).toBe(200);
    expect(await status(u.token)).toEqual({ enabled: true, recovery_codes_remaining: 8 });
  });

  it('kills a challenge after 5 invalid codes, even for the right code, without spending it; a new sign-in works', async () => {
    const u = await enrolled();
    const mfaToken = await challenge(u);
    for (let i = 0; i < 5; i++) {
      const r = await verify(mfaToken, wrongCode(u.secret));
      expect(r.status).toBe(401);
      expect(r.body).toMatchObject({ detail: 'invalid MFA code' });
    }
    const c = await freshCode(u);
    const dead = await verify(mfaToken, c.code);
    expect(dead.status).toBe(401);
    expect(dead.body).toMatchObject({ detail: 'invalid or expired MFA token' });
    expect((await verify(mfaToken, u.recovery[0]!)).status).toBe(401);
    expect(await status(u.token)).toEqual({ enabled: true, recovery_codes_remaining: 10 });

    const fresh = await challenge(u);
    expect((await verify(fresh, c.code)).status).toBe(200);
  });

  it('gives exactly one token set to parallel submissions of one challenge, and of one recovery code', async () => {
    const u = await enrolled();
    const mfaToken = await challenge(u);
    const c = await freshCode(u);
    const results = await Promise.all([1, 2, 3, 4, 5].map(() => verify(mfaToken, c.code)));
    expect(results.map((r) => r.status).sort()).toEqual([200, 401, 401, 401, 401]);

    // One recovery code on two live challenges at once: it signs in once.
    const [a, b] = [await challenge(u), await challenge(u)];
    const pair = await Promise.all([verify(a, u.recovery[0]!), verify(b, u.recovery[0]!)]);
    expect(pair.map((r) => r.status).sort()).toEqual([200, 401]);
    expect(await status(u.token)).toEqual({ enabled: true, recovery_codes_remaining: 9 });
  });

  it('limits invalid codes per user over all challenges (429 with Retry-After)', async () => {
    const u = await enrolled();
    for (let round = 0; round < 4; round++) {
      const t = await challenge(u);
      for (let i = 0; i < 5; i++) expect((await verify(t, wrongCode(u.secret))).status).toBe(401);
    }
    const t = await challenge(u);
    const limited = await verify(t, (await freshCode(u)).code);
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('900');
    expect(limited.body).toMatchObject({ status: 429, retry_after: '900' });
    expect((await verify(t, u.recovery[0]!)).status).toBe(429);
    expect(await status(u.token)).toEqual({ enabled: true, recovery_codes_remaining: 10 });
  });

  it('disables with a TOTP or recovery code; a wrong code changes nothing; sign-in then gives tokens', async () => {
    const u = await enrolled();
    for (const code of [wrongCode(u.secret), totp(u.secret, u.lastStep), 'abcd-efgh-jkmn']) {
      const r = await api(mesh, 'POST', '/v1/auth/mfa/disable', {
        confirm: TEST_PASSWORD,
        token: u.token,
        body: { code },
      });
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ status: 400, field: 'code' });
    }
    for (const body of [{}, { code: '' }, { code: 42 }]) {
      const r = await api(mesh, 'POST', '/v1/auth/mfa/disable', {
        confirm: TEST_PASSWORD,
        token: u.token,
        body,
      });
      expect(r.body).toMatchObject({ status: 400, field: 'code' });
    }
    expect(await status(u.token)).toEqual({ enabled: true, recovery_codes_remaining: 10 });

    const off = await api(mesh, 'POST', '/v1/auth/mfa/disable', {
      confirm: TEST_PASSWORD,
      token: u.token,
      body: { code: u.recovery[3] },
    });
    expect(off.status).toBe(200);
    expect(off.body).toEqual({ enabled: false, recovery_codes_remaining: 0 });
    expect(await status(u.token)).toEqual({ enabled: false, recovery_codes_remaining: 0 });
    expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.token })).body['totp_enabled']).toBe(false);
    const again = await api(mesh, 'POST', '/v1/auth/mfa/disable', {
      confirm: TEST_PASSWORD,
      token: u.token,
      body: { code: u.recovery[4] },
    });
    expect(again.body).toMatchObject({ status: 409 });

    const login = await api(mesh, 'POST', '/v1/auth/token', {
      body: { email: u.email, password: TEST_PASSWORD },
    });
    expect(login.status).toBe(200);
    expect(login.body).not.toHaveProperty('mfa_required');
    expect(decodePayload(login.body['access_token'] as string)).toMatchObject({ amr: ['pwd'] });

    // Enrolling again gives a new secret and new recovery codes; the old ones are gone.
    const setup = await api(mesh, 'POST', '/v1/auth/mfa/setup', { confirm: TEST_PASSWORD, token: u.token });
    const secret = setup.body['secret'] as string;
    expect(secret).not.toBe(u.secret);
    const re: Enrolled = { ...u, secret, lastStep: -1 };
    const c = await freshCode(re);
    const confirmed = await api(mesh, 'POST', '/v1/auth/mfa/verify-setup', {
      token: u.token,
      body: { code: c.code },
    });
    expect(confirmed.status).toBe(200);
    secrets.push(secret, ...(confirmed.body['recovery_codes'] as string[]));
    re.lastStep = c.step;
    expect((await verify(await challenge(u), u.recovery[5]!)).status).toBe(401);

    // And a TOTP code turns it off as well.
    const byTotp = await api(mesh, 'POST', '/v1/auth/mfa/disable', {
      confirm: TEST_PASSWORD,
      token: u.token,
      body: { code: (await freshCode(re)).code },
    });
    expect(byTotp.status).toBe(200);
    expect(await status(u.token)).toEqual({ enabled: false, recovery_codes_remaining: 0 });
  });

  it('refuses missing or malformed fields with 400 naming the field, and unknown MFA tokens with 401', async () => {
    for (const [body, field] of [
      [{}, 'mfa_token'],
      [{ code: '123456' }, 'mfa_token'],
      [{ mfa_token: 5, code: '123456' }, 'mfa_token'],
      [{ mfa_token: 'cse_x' }, 'code'],
      [{ mfa_token: 'cse_x', code: 123456 }, 'code'],
    ] as const) {
      const r = await api(mesh, 'POST', '/v1/auth/mfa/verify', { body });
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ status: 400, field });
    }
    expect((await api(mesh, 'POST', '/v1/auth/mfa/verify', { raw: '[1]' })).body).toMatchObject({
      field: 'body',
    });
    for (const mfaToken of [
      'cse_nope',
      `cse_${'a'.repeat(16)}_${'b'.repeat(43)}`,
      `csr_${'a'.repeat(16)}_${'b'.repeat(43)}`,
    ]) {
      const r = await verify(mfaToken, '123456');
      expect(r.status).toBe(401);
      expect(r.body).toMatchObject({ detail: 'invalid or expired MFA token' });
    }
    // A challenge whose secret part is altered is refused, and costs the real challenge nothing.
    const u = await enrolled();
    const real = await challenge(u);
    for (let i = 0; i < 6; i++) expect((await verify(`${real.slice(0, -3)}zzz`, '123456')).status).toBe(401);
    expect((await verify(real, (await freshCode(u)).code)).status).toBe(200);
  });

  it('keeps the enrolment endpoints to signed-in humans', async () => {
    const user = await quickUser(mesh);
    const agent = await api(mesh, 'POST', '/v1/agents', { token: user.token, body: { name: 'mfa-bot' } });
    const agentToken = (
      await api(mesh, 'POST', '/v1/auth/agent-token', { body: { api_key: agent.body['api_key'] } })
    ).body['access_token'] as string;
    expect(agentToken).toEqual(expect.any(String));
    const calls: Array<[string, string, unknown]> = [
      ['POST', '/v1/auth/mfa/setup', undefined],
      ['POST', '/v1/auth/mfa/verify-setup', { code: '123456' }],
      ['GET', '/v1/auth/mfa/status', undefined],
      ['POST', '/v1/auth/mfa/disable', { code: '123456' }],
    ];
    for (const [method, path, body] of calls) {
      const asAgent = await api(mesh, method, path, { token: agentToken, ...(body ? { body } : {}) });
      expect(asAgent.status).toBe(403);
      expect(asAgent.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect((await api(mesh, method, path, body ? { body } : {})).status).toBe(401);
    }
  });

  it('never logs a TOTP secret, recovery code or MFA token', () => {
    const logs = [...SERVICES].flatMap((svc) => mesh.output.get(svc) ?? []).join('\n');
    expect(secrets.length).toBeGreaterThan(20);
    for (const s of secrets) expect(logs).not.toContain(s);
  });
});
