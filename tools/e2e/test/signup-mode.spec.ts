import fs from 'node:fs';
import path from 'node:path';
import { type Mesh, startMesh } from '../src/mesh';
import { TEST_PASSWORD, api, decodePayload, expectProblem } from '../src/api';
import { sqlOn } from '../src/db';
import { waitUntil } from '../src/faults';
import { type GoogleIdp, startGoogleIdp } from '../src/google-idp';

// Issue 16, install-level settings: SIGNUP_MODE (identity's own default, `invite`; the test
// profile sets `open` for every other spec) with the install's first account as platform admin,
// then `closed`; and the absolute lifetime of a session (REFRESH_TOKEN_FAMILY_TTL_SECONDS). A
// private mesh: the first account of an install only exists on a database of its own.
describe('signup modes and session lifetime (private mesh)', () => {
  let mesh: Mesh;
  let idp: GoogleIdp;
  const FAMILY_TTL_SECONDS = 3600;
  const GOOGLE_CLIENT = 'custos-signup-mode.apps.googleusercontent.com';

  beforeAll(async () => {
    idp = await startGoogleIdp(GOOGLE_CLIENT);
    mesh = await startMesh({
      extraEnv: {
        SIGNUP_MODE: 'invite',
        EMAIL_VERIFICATION_REQUIRED: 'false',
        REFRESH_TOKEN_FAMILY_TTL_SECONDS: String(FAMILY_TTL_SECONDS),
        GOOGLE_CLIENT_IDS: GOOGLE_CLIENT,
        GOOGLE_JWKS_URL: idp.jwksUrl,
      },
    });
  });
  afterAll(async () => {
    await mesh?.stop();
    await idp?.close();
  });

  const signup = (email: string) =>
    api(mesh, 'POST', '/v1/auth/signup', { body: { email, password: TEST_PASSWORD } });
  const signIn = (email: string) =>
    api(mesh, 'POST', '/v1/auth/token', { body: { email, password: TEST_PASSWORD } });
  const countUsers = async () =>
    Number((await sqlOn<{ n: string }>(mesh, 'SELECT count(*) AS n FROM identity.users'))[0]!.n);

  /** The invitation token e-mailed to `email` (the private mesh writes e-mail to MAIL_DIR). */
  async function invitationTo(email: string): Promise<string> {
    const dir = mesh.env['MAIL_DIR']!;
    let token: string | undefined;
    await waitUntil(
      () => {
        for (const f of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
          if (!f.endsWith('.eml')) continue;
          const text = fs.readFileSync(path.join(dir, f), 'utf8');
          if (!text.includes(`To: ${email}`)) continue;
          token = /accept-invite\?token=(\S+)/.exec(text)?.[1];
          if (token) return true;
        }
        return false;
      },
      10_000,
      `the invitation to ${email}`,
    );
    return decodeURIComponent(token!);
  }

  let admin: { email: string; token: string };

  it('invite: of two parallel first signups one gets in as platform admin, the other is refused 403 signup_closed', async () => {
    const [a, b] = await Promise.all([signup('first-a@example.com'), signup('first-b@example.com')]);
    const [won, lost] = a.status === 201 ? [a, b] : [b, a];
    expect(won.status).toBe(201);
    expectProblem(lost, 403, { type: 'signup_closed', detail: expect.stringMatching(/signup mode: invite/) });
    expect(await countUsers()).toBe(1);
    const token = won.body['access_token'] as string;
    expect(decodePayload(token)['platform_admin']).toBe(true);
    admin = { email: won.body['email'] as string, token };
    // The platform-admin endpoints are the first account's.
    const listed = await api(mesh, 'GET', '/v1/admin/users', { token });
    expect(listed.status).toBe(200);
    expect(listed.body['users']).toEqual([
      expect.objectContaining({ email: admin.email, platform_admin: true }),
    ]);
    // The refused address has no account.
    expect((await signIn(lost === a ? 'first-a@example.com' : 'first-b@example.com')).status).toBe(401);
  });

  it('invite: a later signup is refused, an invited person gets in (not as platform admin)', async () => {
    expectProblem(await signup('later@example.com'), 403, { type: 'signup_closed' });
    expect((await signIn('later@example.com')).status).toBe(401);

    const sent = await api(mesh, 'POST', '/v1/org/invite', {
      token: admin.token,
      body: { email: 'invited@example.com' },
    });
    expect(sent.status).toBe(200);
    const accepted = await api(mesh, 'POST', '/v1/org/invites/accept', {
      body: { token: await invitationTo('invited@example.com'), password: TEST_PASSWORD },
    });
    expect(accepted.status).toBe(201);
    const login = await signIn('invited@example.com');
    expect(login.status).toBe(200);
    expect(decodePayload(login.body['access_token'] as string)['platform_admin']).toBeUndefined();
    expectProblem(
      await api(mesh, 'GET', '/v1/admin/users', { token: login.body['access_token'] as string }),
      403,
    );
    expect(await countUsers()).toBe(2);
  });

  it('invite: Google sign-in creates no account for a new address, and signs an existing one in', async () => {
    const google = (email: string) =>
      api(mesh, 'POST', '/v1/auth/google', { body: { id_token: idp.idToken(email) } });
    expectProblem(await google('g-new@example.com'), 403, {
      type: 'signup_closed',
      detail: expect.stringMatching(/signup mode: invite/),
    });
    expect(await countUsers()).toBe(2);
    const existing = await google(admin.email);
    expect(existing.status).toBe(200);
    expect(decodePayload(existing.body['access_token'] as string)['platform_admin']).toBe(true);
  });

  it('a session ends at its absolute lifetime: refresh answers 401, a new sign-in works', async () => {
    const login = await signIn(admin.email);
    const first = await api(mesh, 'POST', '/v1/auth/refresh', {
      body: { refresh_token: login.body['refresh_token'] },
    });
    expect(first.status).toBe(200);
    const family = String(decodePayload(first.body['access_token'] as string)['sid']);
    // The sign-in was longer ago than a session may live.
    await sqlOn(
      mesh,
      `UPDATE identity.refresh_tokens SET created_at = created_at - make_interval(secs => $2)
        WHERE family_id = $1`,
      [family, FAMILY_TTL_SECONDS + 5],
    );
    const expired = await api(mesh, 'POST', '/v1/auth/refresh', {
      body: { refresh_token: first.body['refresh_token'] },
    });
    expectProblem(expired, 401, { detail: 'session expired: sign in again' });
    const rows = await sqlOn<{ n: string }>(
      mesh,
      'SELECT count(*) AS n FROM identity.refresh_tokens WHERE family_id = $1',
      [family],
    );
    expect(rows[0]!.n).toBe('2');
    const again = await signIn(admin.email);
    expect(again.status).toBe(200);
    expect(
      (await api(mesh, 'POST', '/v1/auth/refresh', { body: { refresh_token: again.body['refresh_token'] } }))
        .status,
    ).toBe(200);
  });

  it('closed: no signup and no invited account, while existing accounts still sign in', async () => {
    // An invitation sent while invitations were open, accepted after the install closed.
    const sent = await api(mesh, 'POST', '/v1/org/invite', {
      token: admin.token,
      body: { email: 'too-late@example.com' },
    });
    expect(sent.status).toBe(200);
    const invitation = await invitationTo('too-late@example.com');

    await mesh.kill('identity', 'SIGTERM');
    mesh.env['SIGNUP_MODE'] = 'closed';
    mesh.restart('identity');
    let answer: Awaited<ReturnType<typeof signup>> | undefined;
    await waitUntil(
      async () => {
        answer = await signup('closed@example.com');
        return answer.status !== 503 && answer.status !== 502;
      },
      60_000,
      'identity back after its restart',
    );
    expectProblem(answer!, 403, {
      type: 'signup_closed',
      detail: expect.stringMatching(/signup mode: closed/),
    });
    const accept = await api(mesh, 'POST', '/v1/org/invites/accept', {
      body: { token: invitation, password: TEST_PASSWORD },
    });
    expectProblem(accept, 403, { type: 'signup_closed' });
    // The invitation was not spent, nothing was created.
    const invite = await sqlOn<{ accepted_at: Date | null }>(
      mesh,
      "SELECT accepted_at FROM identity.org_invites WHERE lower(email) = 'too-late@example.com'",
    );
    expect(invite).toEqual([{ accepted_at: null }]);
    expect(await countUsers()).toBe(2);
    expect((await signIn(admin.email)).status).toBe(200);
    expect((await signIn('invited@example.com')).status).toBe(200);
  });
});
