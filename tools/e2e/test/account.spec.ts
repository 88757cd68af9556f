import { randomBytes } from 'node:crypto';
import { type CapturedMessage, type SmtpCapture } from '@custos/testing';
import { TEST_PASSWORD, api, countStatuses, quickUser } from '../src/api';
import { SERVICES, sharedMail, sharedMesh, type Mesh } from '../src/mesh';

const NEW_PASSWORD = 'Another-Horse-7-staple';
const RESET_TOKEN = /cse_[A-Za-z0-9]{16}_[A-Za-z0-9]{43}/;

describe('account: passwords, e-mail change, re-auth and step-up, deletion, settings, quota', () => {
  let mesh: Mesh;
  let smtp: SmtpCapture;
  /** Every secret the tests sent or received; none may appear in a log line. */
  const secrets: string[] = [TEST_PASSWORD, NEW_PASSWORD];
  /** 6-digit codes; checked as whole numbers, since digits alone occur in logs. */
  const codes: string[] = [];
  const taken = new Set<CapturedMessage>();

  beforeAll(async () => {
    mesh = await sharedMesh();
    smtp = sharedMail();
  });
  afterAll(async () => {
    await mesh?.stop();
    await smtp?.close();
  });

  const newEmail = () => `acct-${randomBytes(5).toString('hex')}@example.com`;

  /** The next e-mail to `to` that no test has read yet. */
  async function nextMail(to: string): Promise<CapturedMessage> {
    const m = await smtp.waitForMessage((x) => x.to === to && !taken.has(x), 10000);
    taken.add(m);
    return m;
  }

  async function login(email: string, password: string) {
    const r = await api(mesh, 'POST', '/v1/auth/token', { body: { email, password } });
    if (r.status === 200) secrets.push(r.body['access_token'] as string, r.body['refresh_token'] as string);
    return r;
  }

  /** A signed-up user with a second session (access and refresh token) from a password sign-in. */
  async function userWithSession() {
    const u = await quickUser(mesh);
    secrets.push(u.token);
    const s = await login(u.email, TEST_PASSWORD);
    expect(s.status).toBe(200);
    return {
      ...u,
      session: { access: s.body['access_token'] as string, refresh: s.body['refresh_token'] as string },
    };
  }

  async function requestReset(email: string): Promise<string> {
    const r = await api(mesh, 'POST', '/v1/auth/forgot-password', { body: { email } });
    expect(r.status).toBe(200);
    const mail = await nextMail(email);
    expect(mail.subject).toBe('Reset your Custos password');
    const token = RESET_TOKEN.exec(mail.text)?.[0];
    expect(token).toBeDefined();
    expect(mail.text).toContain(`https://custos.test/reset-password?token=${token!}`);
    secrets.push(token!);
    return token!;
  }

  async function reauth(token: string, body: Record<string, unknown>) {
    const r = await api(mesh, 'POST', '/v1/auth/reauth', { token, body });
    if (typeof r.body['token'] === 'string') secrets.push(r.body['token']);
    return r;
  }

  async function deleteMe(token: string, opts: { confirm?: string; confirmation?: unknown } = {}) {
    const res = await fetch(`${mesh.baseUrl}/v1/auth/me`, {
      method: 'DELETE',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        ...(opts.confirm !== undefined ? { 'x-auth-confirm': opts.confirm } : {}),
      },
      body: JSON.stringify(
        opts.confirmation === undefined
          ? { confirmation: 'DELETE MY ACCOUNT' }
          : { confirmation: opts.confirmation },
      ),
    });
    const text = await res.text();
    return {
      status: res.status,
      body: (text ? JSON.parse(text) : {}) as Record<string, unknown>,
      headers: res.headers,
    };
  }

  async function agentToken(ownerToken: string): Promise<string> {
    const created = await api(mesh, 'POST', '/v1/agents', { token: ownerToken, body: { name: 'quota-bot' } });
    expect(created.status).toBe(201);
    const apiKey = created.body['api_key'] as string;
    const agent = created.body['agent'] as { id: string };
    const t = await api(mesh, 'POST', '/v1/auth/agent-token', {
      body: { agent_id: agent.id, api_key: apiKey },
    });
    expect(t.status).toBe(200);
    secrets.push(apiKey, t.body['access_token'] as string);
    return t.body['access_token'] as string;
  }

  describe('forgot and reset password', () => {
    it('answers alike for known and unknown addresses, and mails a link only to a real account', async () => {
      const u = await quickUser(mesh);
      const unknown = newEmail();
      const known = await api(mesh, 'POST', '/v1/auth/forgot-password', { body: { email: u.email } });
      const other = await api(mesh, 'POST', '/v1/auth/forgot-password', { body: { email: unknown } });
      expect(known.status).toBe(200);
      expect(other.status).toBe(200);
      expect(other.body).toEqual(known.body);
      expect(known.body).toEqual({ message: expect.any(String), status: 'email_sent' });

      const mail = await nextMail(u.email);
      expect(mail.text).toMatch(RESET_TOKEN);
      secrets.push(RESET_TOKEN.exec(mail.text)![0]);
      // The known address's mail came; by then the unknown one would have had its own.
      await new Promise((r) => setTimeout(r, 300));
      expect(smtp.messages.filter((m) => m.to === unknown)).toHaveLength(0);

      const bad = await api(mesh, 'POST', '/v1/auth/forgot-password', { body: { email: 'nope' } });
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ field: 'email' });
    });

    it('resets once, ends every old session and token, and only the new password signs in', async () => {
      const u = await userWithSession();
      const token = await requestReset(u.email);

      const weak = await api(mesh, 'POST', '/v1/auth/reset-password', {
        body: { token, new_password: 'short' },
      });
      expect(weak.status).toBe(400);
      expect(weak.body).toMatchObject({ status: 400, field: 'new_password' });
      // The refusal changed nothing: the old password and tokens still work.
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.session.access })).status).toBe(200);

      const ok = await api(mesh, 'POST', '/v1/auth/reset-password', {
        body: { token, new_password: NEW_PASSWORD },
      });
      expect(ok.status).toBe(200);
      expect(ok.body).toEqual({ message: expect.any(String) });

      expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.token })).status).toBe(401);
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.session.access })).status).toBe(401);
      const refresh = await api(mesh, 'POST', '/v1/auth/refresh', {
        body: { refresh_token: u.session.refresh },
      });
      expect(refresh.status).toBe(401);
      expect((await login(u.email, TEST_PASSWORD)).status).toBe(401);
      const fresh = await login(u.email, NEW_PASSWORD);
      expect(fresh.status).toBe(200);
      expect(
        (await api(mesh, 'GET', '/v1/auth/me', { token: fresh.body['access_token'] as string })).status,
      ).toBe(200);

      const again = await api(mesh, 'POST', '/v1/auth/reset-password', {
        body: { token, new_password: 'Yet-Another-8-password' },
      });
      expect(again.status).toBe(400);
      expect(again.body).toMatchObject({ field: 'token' });
      expect((await login(u.email, NEW_PASSWORD)).status).toBe(200);
    });

    it('refuses malformed and superseded tokens naming the field', async () => {
      const u = await quickUser(mesh);
      const first = await requestReset(u.email);
      const second = await requestReset(u.email);
      const old = await api(mesh, 'POST', '/v1/auth/reset-password', {
        body: { token: first, new_password: NEW_PASSWORD },
      });
      expect(old.status).toBe(400);
      expect(old.body).toMatchObject({ field: 'token', type: 'about:blank' });
      for (const token of ['', 'cse_nope', second.slice(0, -1) + (second.endsWith('A') ? 'B' : 'A'), 42]) {
        const r = await api(mesh, 'POST', '/v1/auth/reset-password', {
          body: { token, new_password: NEW_PASSWORD },
        });
        expect(r.status).toBe(400);
        expect(r.body).toMatchObject({ field: 'token' });
      }
      expect((await login(u.email, TEST_PASSWORD)).status).toBe(200);
    });
  });

  describe('change and set password', () => {
    it('changes the password with 204 and ends every session, the caller’s included', async () => {
      const u = await userWithSession();
      const r = await api(mesh, 'POST', '/v1/auth/change-password', {
        token: u.token,
        body: { current_password: TEST_PASSWORD, new_password: NEW_PASSWORD },
        confirm: TEST_PASSWORD,
      });
      expect(r.status).toBe(204);
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.token })).status).toBe(401);
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.session.access })).status).toBe(401);
      expect(
        (await api(mesh, 'POST', '/v1/auth/refresh', { body: { refresh_token: u.session.refresh } })).status,
      ).toBe(401);
      expect((await login(u.email, TEST_PASSWORD)).status).toBe(401);
      const fresh = await login(u.email, NEW_PASSWORD);
      expect(fresh.status).toBe(200);
      expect(
        (await api(mesh, 'GET', '/v1/auth/me', { token: fresh.body['access_token'] as string })).status,
      ).toBe(200);
    });

    it('refuses a wrong current password, a weak or unchanged new one, and changes nothing', async () => {
      const u = await quickUser(mesh);
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ current_password: `${TEST_PASSWORD}x`, new_password: NEW_PASSWORD }, 'current_password'],
        [{ new_password: NEW_PASSWORD }, 'current_password'],
        [{ current_password: TEST_PASSWORD, new_password: 'weakpassword' }, 'new_password'],
        [{ current_password: TEST_PASSWORD }, 'new_password'],
        [{ current_password: TEST_PASSWORD, new_password: TEST_PASSWORD }, 'new_password'],
        [{ current_password: 42, new_password: NEW_PASSWORD }, 'current_password'],
      ];
      for (const [body, field] of cases) {
        const r = await api(mesh, 'POST', '/v1/auth/change-password', {
          token: u.token,
          body,
          confirm: TEST_PASSWORD,
        });
        expect(r.status).toBe(400);
        expect(r.body).toMatchObject({ status: 400, field });
      }
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.token })).status).toBe(200);
      expect((await login(u.email, TEST_PASSWORD)).status).toBe(200);
    });

    it('refuses set-password when the passwords differ or the account has one', async () => {
      const u = await quickUser(mesh);
      const differ = await api(mesh, 'POST', '/v1/auth/set-password', {
        token: u.token,
        body: { password: NEW_PASSWORD, password_confirm: `${NEW_PASSWORD}x` },
        confirm: TEST_PASSWORD,
      });
      expect(differ.status).toBe(400);
      expect(differ.body).toMatchObject({ field: 'password_confirm' });
      const has = await api(mesh, 'POST', '/v1/auth/set-password', {
        token: u.token,
        body: { password: NEW_PASSWORD, password_confirm: NEW_PASSWORD },
        confirm: TEST_PASSWORD,
      });
      expect(has.status).toBe(400);
      expect(has.body).toMatchObject({ field: 'password' });
      expect((await login(u.email, TEST_PASSWORD)).status).toBe(200);
      expect((await login(u.email, NEW_PASSWORD)).status).toBe(401);
    });

    it('keeps password routes from agents and anonymous callers', async () => {
      const u = await quickUser(mesh);
      const agent = await agentToken(u.token);
      const body = { current_password: TEST_PASSWORD, new_password: NEW_PASSWORD };
      expect((await api(mesh, 'POST', '/v1/auth/change-password', { token: agent, body })).status).toBe(403);
      expect((await api(mesh, 'POST', '/v1/auth/change-password', { body })).status).toBe(401);
    });
  });

  describe('e-mail change', () => {
    /** Asks for a change to `to` (sent as `sendAs`) and reads the code from the new address. */
    async function requestChange(token: string, to: string, sendAs = to) {
      const r = await api(mesh, 'POST', '/v1/auth/change-email', {
        token,
        body: { new_email: sendAs },
        confirm: TEST_PASSWORD,
      });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ message: expect.any(String), new_email: to, expires_in_seconds: 600 });
      const mail = await nextMail(to);
      const code = /\b(\d{6})\b/.exec(mail.text)?.[1];
      expect(code).toBeDefined();
      codes.push(code!);
      return code!;
    }

    it('sends a code to the new address and switches the sign-in address when it is entered', async () => {
      const u = await quickUser(mesh);
      const to = newEmail();
      const code = await requestChange(u.token, to, ` ${to.toUpperCase()} `);
      const wrong = await api(mesh, 'POST', '/v1/auth/verify-email-change', {
        token: u.token,
        body: { code: code === '000000' ? '000001' : '000000' },
      });
      expect(wrong.status).toBe(400);
      expect(wrong.body).toMatchObject({ field: 'code' });
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.token })).body['email']).toBe(u.email);

      const ok = await api(mesh, 'POST', '/v1/auth/verify-email-change', { token: u.token, body: { code } });
      expect(ok.status).toBe(200);
      expect(ok.body).toEqual({ message: expect.any(String), email: to });
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.token })).body).toMatchObject({
        email: to,
        email_verified: true,
      });
      expect((await login(to, TEST_PASSWORD)).status).toBe(200);
      expect((await login(u.email, TEST_PASSWORD)).status).toBe(401);
      const reused = await api(mesh, 'POST', '/v1/auth/verify-email-change', {
        token: u.token,
        body: { code },
      });
      expect(reused.status).toBe(400);
      expect(reused.body).toMatchObject({ field: 'code' });
    });

    it('refuses a taken, unchanged or malformed address, and a verify with nothing pending', async () => {
      const a = await quickUser(mesh);
      const b = await quickUser(mesh);
      const takenR = await api(mesh, 'POST', '/v1/auth/change-email', {
        token: a.token,
        body: { new_email: b.email.toUpperCase() },
        confirm: TEST_PASSWORD,
      });
      expect(takenR.status).toBe(409);
      expect(takenR.body).toMatchObject({ status: 409, field: 'new_email' });
      // Without a valid step-up, a taken address answers as a free one would: the failed proof.
      for (const new_email of [b.email, `free-${b.email}`]) {
        const junk = await api(mesh, 'POST', '/v1/auth/change-email', {
          token: a.token,
          body: { new_email },
          confirm: 'not-my-password',
        });
        expect({ new_email, status: junk.status, type: junk.body['type'] }).toEqual({
          new_email,
          status: 403,
          type: 'step_up_required',
        });
      }
      for (const new_email of [a.email, 'not-an-email', '', 7]) {
        const r = await api(mesh, 'POST', '/v1/auth/change-email', {
          token: a.token,
          body: { new_email },
          confirm: TEST_PASSWORD,
        });
        expect(r.status).toBe(400);
        expect(r.body).toMatchObject({ field: 'new_email' });
      }
      const none = await api(mesh, 'POST', '/v1/auth/verify-email-change', {
        token: a.token,
        body: { code: '123456' },
      });
      expect(none.status).toBe(400);
      expect(none.body).toMatchObject({ field: 'code' });
      const agent = await agentToken(a.token);
      expect(
        (await api(mesh, 'POST', '/v1/auth/change-email', { token: agent, body: { new_email: newEmail() } }))
          .status,
      ).toBe(403);
    });

    it('keeps one pending request per user: a new request replaces the old code', async () => {
      const u = await quickUser(mesh);
      const first = await requestChange(u.token, newEmail());
      const secondTo = newEmail();
      const second = await requestChange(u.token, secondTo);
      if (first !== second) {
        const old = await api(mesh, 'POST', '/v1/auth/verify-email-change', {
          token: u.token,
          body: { code: first },
        });
        expect(old.status).toBe(400);
      }
      const ok = await api(mesh, 'POST', '/v1/auth/verify-email-change', {
        token: u.token,
        body: { code: second },
      });
      expect(ok.status).toBe(200);
      expect(ok.body['email']).toBe(secondTo);
    });

    it('voids the code after five wrong tries, even for the right code', async () => {
      const u = await quickUser(mesh);
      const code = await requestChange(u.token, newEmail());
      const wrongCode = code === '999999' ? '999998' : '999999';
      for (let i = 0; i < 5; i++) {
        const r = await api(mesh, 'POST', '/v1/auth/verify-email-change', {
          token: u.token,
          body: { code: wrongCode },
        });
        expect(r.status).toBe(400);
        expect(r.body).toMatchObject({ field: 'code' });
      }
      const late = await api(mesh, 'POST', '/v1/auth/verify-email-change', {
        token: u.token,
        body: { code },
      });
      expect(late.status).toBe(400);
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.token })).body['email']).toBe(u.email);
    });

    it('lets exactly one of two users racing for the same address have it', async () => {
      const a = await quickUser(mesh);
      const b = await quickUser(mesh);
      const to = newEmail();
      const codeA = await requestChange(a.token, to);
      const codeB = await requestChange(b.token, to);
      const [ra, rb] = await Promise.all([
        api(mesh, 'POST', '/v1/auth/verify-email-change', { token: a.token, body: { code: codeA } }),
        api(mesh, 'POST', '/v1/auth/verify-email-change', { token: b.token, body: { code: codeB } }),
      ]);
      expect([ra.status, rb.status].sort()).toEqual([200, 409]);
      const loser = ra.status === 409 ? ra : rb;
      expect(loser.body).toMatchObject({ status: 409, field: 'new_email' });
      const emails = await Promise.all(
        [a, b].map(async (u) => (await api(mesh, 'GET', '/v1/auth/me', { token: u.token })).body['email']),
      );
      expect(emails.filter((e) => e === to)).toHaveLength(1);
    });
  });

  describe('re-authentication and step-up', () => {
    it('issues a single-use rat_ token bound to its purpose', async () => {
      const u = await quickUser(mesh);
      const r = await reauth(u.token, { purpose: 'account.delete', password: TEST_PASSWORD });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({
        token: expect.stringMatching(/^rat_[A-Za-z0-9]{16}_[A-Za-z0-9]{43}$/),
        purpose: 'account.delete',
        expires_in: 300,
      });
      expect(r.headers.get('cache-control')).toBe('no-store');
    });

    it('refuses a wrong password with 403, and missing or unsupported proofs with 400 naming the field', async () => {
      const u = await quickUser(mesh);
      const wrong = await reauth(u.token, { purpose: 'account.delete', password: `${TEST_PASSWORD}x` });
      expect(wrong.status).toBe(403);
      expect(wrong.body).toMatchObject({ status: 403, field: 'password' });
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ purpose: 'account.delete' }, 'password'],
        [{ purpose: 'account.delete', totp_code: '123456' }, 'totp_code'],
        [{ purpose: 'account.delete', passkey_assertion: { id: 'x' } }, 'passkey_assertion'],
        [{ password: TEST_PASSWORD }, 'purpose'],
        [{ purpose: 'Not A Purpose', password: TEST_PASSWORD }, 'purpose'],
      ];
      for (const [body, field] of cases) {
        const r = await reauth(u.token, body);
        expect(r.status).toBe(400);
        expect(r.body).toMatchObject({ status: 400, field });
      }
      const agent = await agentToken(u.token);
      expect((await reauth(agent, { purpose: 'account.delete', password: TEST_PASSWORD })).status).toBe(403);
    });

    it('locks re-auth for the user after ten wrong passwords, even under parallel guessing', async () => {
      const u = await quickUser(mesh);
      const other = await quickUser(mesh);
      // Concurrent waves of three: fourteen (and even five) 64 MiB argon2id hashes at once can
      // outlast the gateway's deadline on a busy 2-core machine running the suite (503s); the
      // threshold is still crossed inside a wave (the fourth: guess 10 counts, 11 and 12 are locked).
      const guesses: Awaited<ReturnType<typeof reauth>>[] = [];
      for (const wave of [3, 3, 3, 3, 2]) {
        const base = guesses.length;
        guesses.push(
          ...(await Promise.all(
            Array.from({ length: wave }, (_, i) =>
              reauth(u.token, { purpose: 'account.delete', password: `Wrong-Guess-${base + i}-xyz` }),
            ),
          )),
        );
      }
      // Counted first, so a failure names the unexpected status (a 503 of an overloaded machine).
      expect(countStatuses(guesses)).toEqual({ 403: 10, 429: 4 });
      expect(guesses.filter((g) => g.status === 403)).toHaveLength(10);
      const locked = guesses.filter((g) => g.status === 429);
      expect(locked).toHaveLength(4);
      expect(locked[0]!.body).toMatchObject({ status: 429, title: 'Too Many Requests' });
      expect(Number(locked[0]!.headers.get('retry-after'))).toBeGreaterThan(800);

      // The right password is refused too while locked, on every path that checks it.
      const right = await reauth(u.token, { purpose: 'account.delete', password: TEST_PASSWORD });
      expect(right.status).toBe(429);
      expect(Number(right.headers.get('retry-after'))).toBeLessThanOrEqual(900);
      const del = await deleteMe(u.token, { confirm: TEST_PASSWORD });
      expect(del.status).toBe(429);
      expect(del.headers.get('retry-after')).toMatch(/^\d+$/);
      const change = await api(mesh, 'POST', '/v1/auth/change-password', {
        token: u.token,
        body: { current_password: TEST_PASSWORD, new_password: NEW_PASSWORD },
        confirm: TEST_PASSWORD,
      });
      expect(change.status).toBe(429);
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.token })).status).toBe(200);
      expect((await login(u.email, TEST_PASSWORD)).status).toBe(200);
      // The lock is per user.
      expect((await reauth(other.token, { purpose: 'account.delete', password: TEST_PASSWORD })).status).toBe(
        200,
      );
    });
  });

  describe('DELETE /v1/auth/me', () => {
    it('needs the exact confirmation phrase (400) and a step-up (401 challenge, 403 for a failed proof), and changes nothing until both', async () => {
      const u = await quickUser(mesh);
      const rat = (await reauth(u.token, { purpose: 'account.delete', password: TEST_PASSWORD })).body[
        'token'
      ] as string;
      for (const confirmation of ['delete my account', 'DELETE MY ACCOUNT ', '', 1]) {
        const r = await deleteMe(u.token, { confirm: rat, confirmation });
        expect(r.status).toBe(400);
        expect(r.body).toMatchObject({ status: 400, field: 'confirmation' });
      }
      const none = await deleteMe(u.token);
      expect(none.status).toBe(401);
      expect(none.body).toMatchObject({
        status: 401,
        type: 'step_up_required',
        purpose: 'account.delete',
        accepted: ['reauth_token', 'password', 'totp'],
      });
      const wrongPassword = await deleteMe(u.token, { confirm: `${TEST_PASSWORD}x` });
      expect(wrongPassword.body).toMatchObject({
        status: 403,
        type: 'step_up_required',
        purpose: 'account.delete',
      });
      const forged = await deleteMe(u.token, {
        confirm: `${rat.slice(0, -1)}${rat.endsWith('a') ? 'b' : 'a'}`,
      });
      expect(forged.body).toMatchObject({ status: 403, type: 'step_up_required' });

      const otherPurpose = (
        await reauth(u.token, { purpose: 'security.passkey.register', password: TEST_PASSWORD })
      ).body['token'] as string;
      const wrongPurpose = await deleteMe(u.token, { confirm: otherPurpose });
      expect(wrongPurpose.status).toBe(403);
      expect(wrongPurpose.body).toMatchObject({ type: 'step_up_required', purpose: 'account.delete' });

      const stranger = await quickUser(mesh);
      const strangerRat = (
        await reauth(stranger.token, { purpose: 'account.delete', password: TEST_PASSWORD })
      ).body['token'] as string;
      expect((await deleteMe(u.token, { confirm: strangerRat })).status).toBe(403);

      expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.token })).status).toBe(200);
      // The refusals above spent nothing: the token still deletes the account.
      expect((await deleteMe(u.token, { confirm: rat })).status).toBe(204);
    });

    it('deletes with the password, ends every token, and frees the address for a new signup', async () => {
      const u = await userWithSession();
      const r = await deleteMe(u.token, { confirm: TEST_PASSWORD });
      expect(r.status).toBe(204);
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.token })).status).toBe(401);
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.session.access })).status).toBe(401);
      expect(
        (await api(mesh, 'POST', '/v1/auth/refresh', { body: { refresh_token: u.session.refresh } })).status,
      ).toBe(401);
      expect((await login(u.email, TEST_PASSWORD)).status).toBe(401);
      const forgot = await api(mesh, 'POST', '/v1/auth/forgot-password', { body: { email: u.email } });
      expect(forgot.status).toBe(200);

      const again = await api(mesh, 'POST', '/v1/auth/signup', {
        body: { email: u.email, password: NEW_PASSWORD },
      });
      expect(again.status).toBe(201);
      secrets.push(again.body['access_token'] as string);
      const me = await api(mesh, 'GET', '/v1/auth/me', { token: again.body['access_token'] as string });
      expect(me.body['email']).toBe(u.email);
      expect(me.body['id']).not.toBe(u.userId);
    });

    it('accepts one rat_ token once, however many requests carry it', async () => {
      const u = await quickUser(mesh);
      const rat = (await reauth(u.token, { purpose: 'account.delete', password: TEST_PASSWORD })).body[
        'token'
      ] as string;
      const results = await Promise.all(Array.from({ length: 6 }, () => deleteMe(u.token, { confirm: rat })));
      expect(results.filter((r) => r.status === 204)).toHaveLength(1);
      // The others lost the token (403) or, answered after the deletion, the session (401). How many
      // of each depends on timing (a fast machine finishes the deletion before any other arrives, so
      // all are 401): exactly one 204 is what shows the token was spent once.
      for (const r of results.filter((x) => x.status !== 204)) expect([401, 403]).toContain(r.status);
    });
  });

  describe('settings', () => {
    it('shows the security settings and refuses a passkey requirement without a passkey', async () => {
      const u = await quickUser(mesh);
      const initial = {
        require_passkey_for_vaults: false,
        require_passkey_for_mfa: false,
        passkey_count: 0,
        passkey_requirements_downgraded: false,
      };
      const get = await api(mesh, 'GET', '/v1/auth/settings', { token: u.token });
      expect(get.status).toBe(200);
      expect(get.body).toEqual(initial);

      const on = await api(mesh, 'PATCH', '/v1/auth/settings', {
        token: u.token,
        body: { require_passkey_for_vaults: true },
      });
      expect(on.status).toBe(400);
      expect(on.body).toMatchObject({ status: 400, field: 'require_passkey_for_vaults' });
      const bad = await api(mesh, 'PATCH', '/v1/auth/settings', {
        token: u.token,
        body: { require_passkey_for_vaults: 'yes' },
      });
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ field: 'require_passkey_for_vaults' });
      const off = await api(mesh, 'PATCH', '/v1/auth/settings', {
        token: u.token,
        body: { require_passkey_for_vaults: false },
      });
      expect(off.status).toBe(200);
      expect(off.body).toEqual(initial);
      expect((await api(mesh, 'GET', '/v1/auth/settings', { token: u.token })).body).toEqual(initial);
      const agent = await agentToken(u.token);
      expect((await api(mesh, 'GET', '/v1/auth/settings', { token: agent })).status).toBe(403);
    });
  });

  describe('feature quota', () => {
    it('allows exactly 30 voice_brief calls of 60 parallel ones in the hour window', async () => {
      // Not across an hour boundary: the window would change under the test.
      const intoHour = Date.now() % 3_600_000;
      if (intoHour > 3_590_000) await new Promise((r) => setTimeout(r, 3_600_000 - intoHour + 500));
      const u = await quickUser(mesh);
      const results = await Promise.all(
        Array.from({ length: 60 }, () =>
          api(mesh, 'POST', '/v1/auth/feature-quota/consume', {
            token: u.token,
            body: { feature: 'voice_brief' },
          }),
        ),
      );
      expect(results.every((r) => r.status === 200)).toBe(true);
      const allowed = results.filter((r) => r.body['allowed'] === true);
      const refused = results.filter((r) => r.body['allowed'] === false);
      expect(allowed).toHaveLength(30);
      expect(refused).toHaveLength(30);
      expect(allowed.map((r) => r.body['remaining']).sort((x, y) => Number(x) - Number(y))).toEqual(
        Array.from({ length: 30 }, (_, i) => i),
      );
      const nextHour = new Date((Math.floor(Date.now() / 3_600_000) + 1) * 3_600_000).toISOString();
      for (const r of [...allowed, ...refused]) {
        expect(r.body).toMatchObject({ limit: 30, reset_at: nextHour });
      }
      for (const r of refused) expect(r.body['remaining']).toBe(0);

      const after = await api(mesh, 'POST', '/v1/auth/feature-quota/consume', {
        token: u.token,
        body: { feature: 'voice_brief' },
      });
      expect(after.body).toEqual({ allowed: false, limit: 30, remaining: 0, reset_at: nextHour });
      // Another user has a quota of their own.
      const other = await quickUser(mesh);
      const first = await api(mesh, 'POST', '/v1/auth/feature-quota/consume', {
        token: other.token,
        body: { feature: 'voice_brief' },
      });
      expect(first.body).toMatchObject({ allowed: true, remaining: 29 });
    });

    it('refuses unknown features (400) and agents (403)', async () => {
      const u = await quickUser(mesh);
      for (const feature of ['other', '', undefined, 5]) {
        const r = await api(mesh, 'POST', '/v1/auth/feature-quota/consume', {
          token: u.token,
          body: { feature },
        });
        expect(r.status).toBe(400);
        expect(r.body).toMatchObject({ status: 400, field: 'feature' });
      }
      const agent = await agentToken(u.token);
      const r = await api(mesh, 'POST', '/v1/auth/feature-quota/consume', {
        token: agent,
        body: { feature: 'voice_brief' },
      });
      expect(r.status).toBe(403);
      const ok = await api(mesh, 'POST', '/v1/auth/feature-quota/consume', {
        token: u.token,
        body: { feature: 'voice_brief' },
      });
      expect(ok.body).toMatchObject({ allowed: true, remaining: 29 });
    });
  });

  it('never writes a password, token or code into any service log', async () => {
    await new Promise((r) => setTimeout(r, 300));
    const logs = [...SERVICES].flatMap((svc) => mesh.output.get(svc) ?? []).join('\n');
    expect(logs.length).toBeGreaterThan(0);
    // This runs last: the other tests have filled the list.
    expect(secrets.length).toBeGreaterThan(40);
    expect(codes.length).toBeGreaterThan(5);
    for (const secret of secrets.filter((s) => typeof s === 'string' && s.length > 8)) {
      expect(logs).not.toContain(secret);
    }
    for (const code of codes) expect(logs).not.toMatch(new RegExp(`(?<![0-9])${code}(?![0-9])`));
  });
});
