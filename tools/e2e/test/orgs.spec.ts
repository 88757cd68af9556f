import { randomBytes } from 'node:crypto';
import { type SmtpCapture } from '@custos/testing';
import { TEST_PASSWORD, api, decodePayload, quickUser } from '../src/api';
import { PLATFORM_ADMIN_EMAIL, sharedMail, sharedMesh, type Mesh } from '../src/mesh';

type User = Awaited<ReturnType<typeof quickUser>>;
type Reply = Awaited<ReturnType<typeof api>>;

const MAX_PENDING_INVITES = 3;
const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';

/** A problem-details refusal with this status (and these members). */
function expectProblem(r: Reply, status: number, members: Record<string, unknown> = {}) {
  expect(r.status).toBe(status);
  expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(r.body).toMatchObject({ status, title: expect.any(String), detail: expect.any(String), ...members });
}

describe('orgs: members, invitations, roles, removal, sub-orgs and the platform-admin endpoints', () => {
  let mesh: Mesh;
  let smtp: SmtpCapture;
  // The shared meshes name it (upper case, with spaces) in PLATFORM_ADMIN_EMAILS; only this spec signs it up.
  const adminEmail = PLATFORM_ADMIN_EMAIL;

  beforeAll(async () => {
    // ORG_MAX_PENDING_INVITES is MAX_PENDING_INVITES there.
    mesh = await sharedMesh();
    smtp = sharedMail();
  });
  afterAll(async () => {
    await mesh?.stop();
    await smtp?.close();
  });

  const newEmail = () => `inv-${randomBytes(4).toString('hex')}@example.com`;
  const mailsTo = (email: string) => smtp.messages.filter((m) => m.to === email);

  async function signIn(email: string, password = TEST_PASSWORD) {
    return api(mesh, 'POST', '/v1/auth/token', { body: { email, password } });
  }

  async function members(token: string) {
    const r = await api(mesh, 'GET', '/v1/org/members', { token });
    expect(r.status).toBe(200);
    return r.body['members'] as Array<Record<string, unknown>>;
  }

  /** Invites an address and returns the token of the e-mail it received. */
  async function inviteToken(inviter: User, email: string, role?: string): Promise<string> {
    const before = mailsTo(email).length;
    const r = await api(mesh, 'POST', '/v1/org/invite', {
      token: inviter.token,
      body: { email, ...(role ? { role } : {}) },
    });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ message: expect.any(String), email });
    const mail = mailsTo(email)[before];
    expect(mail).toBeDefined();
    const token = /accept-invite\?token=(\S+)/.exec(mail!.text)?.[1];
    expect(token).toBeDefined();
    return decodeURIComponent(token!);
  }

  /** Invites a new address with a role, accepts, signs in: a member of the inviter's org. */
  async function invitedUser(inviter: User, role = 'member'): Promise<User> {
    const email = newEmail();
    const token = await inviteToken(inviter, email, role);
    const accepted = await api(mesh, 'POST', '/v1/org/invites/accept', {
      body: { token, password: TEST_PASSWORD },
    });
    expect(accepted.status).toBe(201);
    const login = await signIn(email);
    expect(login.status).toBe(200);
    return {
      email,
      token: login.body['access_token'] as string,
      userId: accepted.body['user_id'] as string,
      orgId: inviter.orgId,
    };
  }

  async function agentToken(owner: User): Promise<string> {
    const created = await api(mesh, 'POST', '/v1/agents', { token: owner.token, body: { name: 'bot' } });
    expect(created.status).toBe(201);
    const agentId = (created.body['agent'] as { id: string }).id;
    const t = await api(mesh, 'POST', '/v1/auth/agent-token', {
      body: { agent_id: agentId, api_key: created.body['api_key'] },
    });
    expect(t.status).toBe(200);
    return t.body['access_token'] as string;
  }

  const patchRole = (token: string, userId: string, role: unknown) =>
    api(mesh, 'PATCH', `/v1/org/members/${userId}`, { confirm: TEST_PASSWORD, token, body: { role } });
  const remove = (token: string, userId: string) =>
    api(mesh, 'DELETE', `/v1/org/members/${userId}`, { token });
  const roles = async (token: string) =>
    Object.fromEntries((await members(token)).map((m) => [m['id'] as string, m['role'] as string]));

  describe('members and invitations', () => {
    it('lists the members of the caller org to any of its humans, never to agents', async () => {
      const owner = await quickUser(mesh);
      const list = await members(owner.token);
      expect(list).toEqual([
        {
          id: owner.userId,
          email: owner.email,
          display_name: '',
          role: 'owner',
          auth_method: 'password',
          created_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/),
        },
      ]);
      const member = await invitedUser(owner);
      expect((await members(member.token)).map((m) => m['id'])).toEqual([owner.userId, member.userId]);

      expectProblem(await api(mesh, 'GET', '/v1/org/members', { token: await agentToken(owner) }), 403);
      expectProblem(await api(mesh, 'GET', '/v1/org/members'), 401);
    });

    it('invites by e-mail; accepting creates a verified member who signs in with that role', async () => {
      const owner = await quickUser(mesh);
      const email = newEmail();
      const token = await inviteToken(owner, email);
      expect(token).toMatch(/^cse_[A-Za-z0-9]{16}_[A-Za-z0-9]{43}$/);
      const mail = mailsTo(email)[0]!;
      expect(mail.subject).toMatch(/^Join ".+" on Custos$/);
      expect(mail.text).toContain('https://custos.test/accept-invite?token=');
      expect(mail.text).toContain(owner.email);

      const accepted = await api(mesh, 'POST', '/v1/org/invites/accept', {
        body: { token, password: TEST_PASSWORD, display_name: 'Grace' },
      });
      expect(accepted.status).toBe(201);
      expect(accepted.body).toEqual({
        message: expect.any(String),
        user_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        email,
        org_id: owner.orgId,
        role: 'member',
      });

      const login = await signIn(email);
      expect(login.status).toBe(200);
      const claims = decodePayload(login.body['access_token'] as string);
      expect(claims).toMatchObject({
        sub: `user:${accepted.body['user_id']}`,
        org: owner.orgId,
        role: 'member',
      });
      expect(claims).not.toHaveProperty('platform_admin');
      const me = await api(mesh, 'GET', '/v1/auth/me', { token: login.body['access_token'] as string });
      expect(me.body).toMatchObject({ email, role: 'member', email_verified: true, display_name: 'Grace' });

      // The token works once.
      const again = await api(mesh, 'POST', '/v1/org/invites/accept', {
        body: { token, password: TEST_PASSWORD },
      });
      expectProblem(again, 400, { field: 'token' });

      // An admin invitation makes an admin.
      const admin = await invitedUser(owner, 'admin');
      expect(decodePayload(admin.token)).toMatchObject({ role: 'admin', org: owner.orgId });
    });

    it('refuses bad invitations with 400 naming the field, members with 409, members and agents with 403', async () => {
      const owner = await quickUser(mesh);
      const member = await invitedUser(owner);
      const fresh = newEmail();
      const invite = (token: string | undefined, body: unknown) =>
        api(mesh, 'POST', '/v1/org/invite', { ...(token ? { token } : {}), body });

      expectProblem(await invite(owner.token, { email: fresh, role: 'owner' }), 400, { field: 'role' });
      expectProblem(await invite(owner.token, { email: fresh, role: 'root' }), 400, { field: 'role' });
      expectProblem(await invite(owner.token, { email: fresh, role: 7 }), 400, { field: 'role' });
      expectProblem(await invite(owner.token, { email: 'not-an-address', role: 'member' }), 400, {
        field: 'email',
      });
      expectProblem(await invite(owner.token, { role: 'member' }), 400, { field: 'email' });
      expectProblem(await invite(owner.token, { email: member.email.toUpperCase() }), 409, {
        field: 'email',
      });
      expectProblem(await invite(owner.token, { email: owner.email }), 409, { field: 'email' });
      expectProblem(await invite(member.token, { email: fresh }), 403);
      expectProblem(await invite(await agentToken(owner), { email: fresh }), 403);
      expectProblem(await invite(undefined, { email: fresh }), 401);

      // Nothing was sent, and nobody joined.
      expect(mailsTo(fresh)).toHaveLength(0);
      expect(await members(owner.token)).toHaveLength(2);
    });

    it('refuses unusable tokens, weak passwords and accounts of another org without spending the token', async () => {
      const owner = await quickUser(mesh);
      expectProblem(await api(mesh, 'POST', '/v1/org/invites/accept', { body: { token: 'cse_nope' } }), 400, {
        field: 'token',
      });
      expectProblem(await api(mesh, 'POST', '/v1/org/invites/accept', { body: {} }), 400, { field: 'token' });

      const email = newEmail();
      const token = await inviteToken(owner, email);
      const forged = token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A');
      expectProblem(
        await api(mesh, 'POST', '/v1/org/invites/accept', {
          body: { token: forged, password: TEST_PASSWORD },
        }),
        400,
        { field: 'token' },
      );
      expectProblem(
        await api(mesh, 'POST', '/v1/org/invites/accept', { body: { token, password: 'short' } }),
        400,
        { field: 'password' },
      );
      expectProblem(await api(mesh, 'POST', '/v1/org/invites/accept', { body: { token } }), 400, {
        field: 'password',
      });
      expect(await members(owner.token)).toHaveLength(1);
      // Still unused: it works now.
      const ok = await api(mesh, 'POST', '/v1/org/invites/accept', {
        body: { token, password: TEST_PASSWORD },
      });
      expect(ok.status).toBe(201);

      // Someone who already has an account in another org cannot move yet.
      const elsewhere = await quickUser(mesh);
      const moveToken = await inviteToken(owner, elsewhere.email);
      const move = await api(mesh, 'POST', '/v1/org/invites/accept', {
        body: { token: moveToken, password: TEST_PASSWORD },
      });
      expectProblem(move, 409, { field: 'email' });
      expect(move.body['detail']).toMatch(/not supported yet/);
      expect(decodePayload((await signIn(elsewhere.email)).body['access_token'] as string)).toMatchObject({
        org: elsewhere.orgId,
        role: 'owner',
      });
    });

    it('replaces a pending invitation by a newer one to the same address', async () => {
      const owner = await quickUser(mesh);
      const email = newEmail();
      const first = await inviteToken(owner, email);
      const second = await inviteToken(owner, email, 'admin');
      expectProblem(
        await api(mesh, 'POST', '/v1/org/invites/accept', {
          body: { token: first, password: TEST_PASSWORD },
        }),
        400,
        { field: 'token' },
      );
      const ok = await api(mesh, 'POST', '/v1/org/invites/accept', {
        body: { token: second, password: TEST_PASSWORD },
      });
      expect(ok.body).toMatchObject({ role: 'admin' });
    });

    it('lets exactly one of several parallel accepts of one token succeed', async () => {
      const owner = await quickUser(mesh);
      const email = newEmail();
      const token = await inviteToken(owner, email);
      const replies = await Promise.all(
        Array.from({ length: 5 }, () =>
          api(mesh, 'POST', '/v1/org/invites/accept', { body: { token, password: TEST_PASSWORD } }),
        ),
      );
      expect(replies.map((r) => r.status).sort()).toEqual([201, 400, 400, 400, 400]);
      expect((await members(owner.token)).filter((m) => m['email'] === email)).toHaveLength(1);
    });

    it(`holds an org to ${MAX_PENDING_INVITES} pending invitations, also under parallel requests`, async () => {
      const owner = await quickUser(mesh);
      const emails = Array.from({ length: MAX_PENDING_INVITES * 2 }, newEmail);
      const replies = await Promise.all(
        emails.map((email) => api(mesh, 'POST', '/v1/org/invite', { token: owner.token, body: { email } })),
      );
      const ok = replies.filter((r) => r.status === 200);
      expect(ok).toHaveLength(MAX_PENDING_INVITES);
      for (const r of replies.filter((x) => x.status !== 200)) {
        expectProblem(r, 403, { type: 'resource_limit_exceeded' });
      }
      expect(emails.filter((e) => mailsTo(e).length > 0)).toHaveLength(MAX_PENDING_INVITES);
    });
  });

  describe('roles and removal', () => {
    it('changes roles; the changed member’s old token stops working and a new sign-in carries the new role', async () => {
      const owner = await quickUser(mesh);
      const member = await invitedUser(owner);
      const r = await patchRole(owner.token, member.userId, 'admin');
      expect(r.status).toBe(200);
      expect(r.body).toEqual({
        id: member.userId,
        email: member.email,
        display_name: '',
        role: 'admin',
        auth_method: 'password',
        created_at: expect.any(String),
      });
      expectProblem(await api(mesh, 'GET', '/v1/auth/me', { token: member.token }), 401);
      // The owner's own token is untouched.
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: owner.token })).status).toBe(200);

      // Right after the answer, a new sign-in carries the new role and is not caught by the revocation.
      const login = await signIn(member.email);
      expect(decodePayload(login.body['access_token'] as string)).toMatchObject({ role: 'admin' });
      const me = await api(mesh, 'GET', '/v1/auth/me', { token: login.body['access_token'] as string });
      expect(me.body).toMatchObject({ role: 'admin' });
      expect((await roles(owner.token))[member.userId]).toBe('admin');
    });

    it('protects owners and the last owner, and refuses members (nothing changes)', async () => {
      const owner = await quickUser(mesh);
      const admin = await invitedUser(owner, 'admin');
      const member = await invitedUser(owner);
      const other = await invitedUser(owner);
      const before = await roles(owner.token);

      expectProblem(await patchRole(admin.token, owner.userId, 'member'), 403);
      expectProblem(await patchRole(admin.token, member.userId, 'owner'), 403);
      expectProblem(await patchRole(member.token, other.userId, 'admin'), 403);
      expectProblem(await patchRole(member.token, member.userId, 'admin'), 403);
      expectProblem(await patchRole(owner.token, owner.userId, 'admin'), 409);
      expectProblem(await patchRole(owner.token, member.userId, 'boss'), 400, { field: 'role' });
      expectProblem(await patchRole(owner.token, member.userId, undefined), 400, { field: 'role' });
      expectProblem(await patchRole(owner.token, 'not-a-uuid', 'admin'), 400, { field: 'user_id' });
      expectProblem(await patchRole(owner.token, UNKNOWN_ID, 'admin'), 404);
      expectProblem(await patchRole(await agentToken(owner), member.userId, 'admin'), 403);
      expect(await roles(owner.token)).toEqual(before);
      // Refusals revoke nothing.
      for (const u of [owner, admin, member, other]) {
        expect((await api(mesh, 'GET', '/v1/auth/me', { token: u.token })).status).toBe(200);
      }

      // An admin manages members and admins.
      expect((await patchRole(admin.token, member.userId, 'admin')).status).toBe(200);
      expect((await patchRole(admin.token, member.userId, 'member')).status).toBe(200);
    });

    it('lets one of two owners step down, but never both at once', async () => {
      const a = await quickUser(mesh);
      const b = await invitedUser(a);
      expect((await patchRole(a.token, b.userId, 'owner')).status).toBe(200);
      const bToken = (await signIn(b.email)).body['access_token'] as string;
      const replies = await Promise.all([
        patchRole(a.token, a.userId, 'admin'),
        patchRole(bToken, b.userId, 'admin'),
      ]);
      expect(replies.map((r) => r.status).sort()).toEqual([200, 409]);
      const after = await roles(replies[0]!.status === 200 ? bToken : a.token);
      expect(Object.values(after).filter((r) => r === 'owner')).toHaveLength(1);
    });

    it('removes a member: the account and its tokens end, and the address can be invited again', async () => {
      const owner = await quickUser(mesh);
      const member = await invitedUser(owner);
      const key = await api(mesh, 'POST', '/v1/auth/api-keys', {
        confirm: TEST_PASSWORD,
        token: member.token,
        body: { name: 'k' },
      });
      expect(key.status).toBe(201);

      expect((await remove(owner.token, member.userId)).status).toBe(204);
      expectProblem(await api(mesh, 'GET', '/v1/auth/me', { token: member.token }), 401);
      expectProblem(await signIn(member.email), 401);
      expectProblem(
        await api(mesh, 'POST', '/v1/auth/api-key-token', { body: { api_key: key.body['api_key'] } }),
        401,
      );
      expect((await members(owner.token)).map((m) => m['id'])).toEqual([owner.userId]);
      expectProblem(await remove(owner.token, member.userId), 404);

      const token = await inviteToken(owner, member.email);
      const again = await api(mesh, 'POST', '/v1/org/invites/accept', {
        body: { token, password: TEST_PASSWORD },
      });
      expect(again.status).toBe(201);
      expect(again.body['user_id']).not.toBe(member.userId);
    });

    it('refuses removals by members, of owners by admins, of oneself, and of unknown ids', async () => {
      const owner = await quickUser(mesh);
      const admin = await invitedUser(owner, 'admin');
      const member = await invitedUser(owner);
      const before = await roles(owner.token);

      expectProblem(await remove(member.token, admin.userId), 403);
      expectProblem(await remove(admin.token, owner.userId), 403);
      expectProblem(await remove(owner.token, owner.userId), 403);
      expectProblem(await remove(admin.token, admin.userId), 403);
      expectProblem(await remove(await agentToken(owner), member.userId), 403);
      expectProblem(await remove(owner.token, UNKNOWN_ID), 404);
      expectProblem(await remove(owner.token, 'nope'), 400, { field: 'user_id' });
      expect(await roles(owner.token)).toEqual(before);

      expect((await remove(admin.token, member.userId)).status).toBe(204);
    });

    it('keeps orgs apart: another org’s member is 404 to change or remove, and stays untouched', async () => {
      const mine = await quickUser(mesh);
      const theirs = await quickUser(mesh);
      const theirMember = await invitedUser(theirs);
      expectProblem(await patchRole(mine.token, theirMember.userId, 'admin'), 404);
      expectProblem(await patchRole(mine.token, theirs.userId, 'member'), 404);
      expectProblem(await remove(mine.token, theirMember.userId), 404);
      expect((await members(mine.token)).map((m) => m['id'])).toEqual([mine.userId]);
      expect(await roles(theirs.token)).toEqual({ [theirs.userId]: 'owner', [theirMember.userId]: 'member' });
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: theirMember.token })).status).toBe(200);
    });
  });

  describe('sub-orgs', () => {
    it('creates sub-orgs under the caller org and lists them to its members only', async () => {
      const owner = await quickUser(mesh);
      const member = await invitedUser(owner);
      const created = await api(mesh, 'POST', '/v1/org/sub-orgs', {
        token: owner.token,
        body: { name: '  Team A  ' },
      });
      expect(created.status).toBe(201);
      expect(created.body).toEqual({
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        name: 'Team A',
        parent_org_id: owner.orgId,
        created_at: expect.any(String),
      });
      const list = await api(mesh, 'GET', '/v1/org/sub-orgs', { token: member.token });
      expect(list.status).toBe(200);
      expect(list.body).toEqual({ sub_orgs: [created.body] });

      const stranger = await quickUser(mesh);
      expect((await api(mesh, 'GET', '/v1/org/sub-orgs', { token: stranger.token })).body).toEqual({
        sub_orgs: [],
      });
    });

    it('refuses members, agents and bad names', async () => {
      const owner = await quickUser(mesh);
      const member = await invitedUser(owner);
      const create = (token: string, body: unknown) => api(mesh, 'POST', '/v1/org/sub-orgs', { token, body });
      expectProblem(await create(member.token, { name: 'x' }), 403);
      expectProblem(await create(await agentToken(owner), { name: 'x' }), 403);
      expectProblem(await create(owner.token, {}), 400, { field: 'name' });
      expectProblem(await create(owner.token, { name: '   ' }), 400, { field: 'name' });
      expectProblem(await create(owner.token, { name: 'x'.repeat(129) }), 400, { field: 'name' });
      expectProblem(await create(owner.token, { name: 42 }), 400, { field: 'name' });
      expect((await api(mesh, 'GET', '/v1/org/sub-orgs', { token: owner.token })).body).toEqual({
        sub_orgs: [],
      });
    });
  });

  describe('platform admins', () => {
    let admin: User;

    beforeAll(async () => {
      const r = await api(mesh, 'POST', '/v1/auth/signup', {
        body: { email: adminEmail, password: TEST_PASSWORD },
      });
      expect(r.status).toBe(201);
      const token = r.body['access_token'] as string;
      const claims = decodePayload(token);
      admin = {
        email: adminEmail,
        token,
        userId: String(claims['sub']).slice('user:'.length),
        orgId: String(claims['org']),
      };
    });

    it('marks the tokens of configured addresses platform_admin: true, and nobody else’s', async () => {
      expect(decodePayload(admin.token)).toMatchObject({ platform_admin: true, role: 'owner' });
      const key = await api(mesh, 'POST', '/v1/auth/api-keys', {
        confirm: TEST_PASSWORD,
        token: admin.token,
        body: { name: 'ops' },
      });
      const exchanged = await api(mesh, 'POST', '/v1/auth/api-key-token', {
        body: { api_key: key.body['api_key'] },
      });
      expect(decodePayload(exchanged.body['access_token'] as string)).toMatchObject({ platform_admin: true });
      const someone = await quickUser(mesh);
      expect(decodePayload(someone.token)).not.toHaveProperty('platform_admin');
    });

    it('refuses the admin endpoints to other users (also org owners) and agents', async () => {
      const owner = await quickUser(mesh);
      const agent = await agentToken(owner);
      for (const token of [owner.token, agent]) {
        expectProblem(await api(mesh, 'GET', '/v1/admin/users', { token }), 403);
        expectProblem(await api(mesh, 'DELETE', `/v1/admin/users/${owner.userId}`, { token }), 403);
        expectProblem(await api(mesh, 'GET', '/v1/admin/settings', { token }), 403);
        expectProblem(await api(mesh, 'GET', '/v1/admin/settings/x', { token }), 403);
        expectProblem(await api(mesh, 'PUT', '/v1/admin/settings/x', { token, body: { value: 'y' } }), 403);
      }
      expectProblem(await api(mesh, 'GET', '/v1/admin/users'), 401);
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: owner.token })).status).toBe(200);
      expectProblem(await api(mesh, 'GET', '/v1/admin/settings/x', { token: admin.token }), 404);
    });

    it('lists every user with a total, in pages', async () => {
      // Other spec files share this mesh: users come and go meanwhile, and there may be more than a
      // page of them. The newest are on the last page, oldest first.
      const someone = await quickUser(mesh);
      const head = await api(mesh, 'GET', '/v1/admin/users?limit=1', { token: admin.token });
      const offset = Math.max(0, (head.body['total'] as number) - 500);
      const all = await api(mesh, 'GET', `/v1/admin/users?limit=1000&offset=${offset}`, {
        token: admin.token,
      });
      expect(all.status).toBe(200);
      const users = all.body['users'] as Array<Record<string, unknown>>;
      expect(all.body['total']).toBeGreaterThanOrEqual(offset + users.length);
      expect(users.find((u) => u['id'] === someone.userId)).toEqual({
        id: someone.userId,
        email: someone.email,
        display_name: '',
        role: 'owner',
        auth_method: 'password',
        org_id: someone.orgId,
        org_name: expect.any(String),
        created_at: expect.any(String),
        platform_admin: false,
      });
      expect(users.find((u) => u['id'] === admin.userId)).toMatchObject({ platform_admin: true });

      const page = await api(mesh, 'GET', `/v1/admin/users?limit=2&offset=${offset + 1}`, {
        token: admin.token,
      });
      expect(page.body['total']).toBeGreaterThanOrEqual(offset + 3);
      // Two neighbours in the listing (a user deleted meanwhile may shift the page by one).
      const ids = users.map((u) => u['id']);
      const pageIds = (page.body['users'] as Array<{ id: string }>).map((u) => u.id);
      expect(pageIds).toHaveLength(2);
      expect(ids).toContain(pageIds[0]);
      expect(ids.indexOf(pageIds[1]!)).toBe(ids.indexOf(pageIds[0]!) + 1);
      expectProblem(await api(mesh, 'GET', '/v1/admin/users?limit=0', { token: admin.token }), 400, {
        field: 'limit',
      });
      expectProblem(await api(mesh, 'GET', '/v1/admin/users?limit=abc', { token: admin.token }), 400, {
        field: 'limit',
      });
      expectProblem(await api(mesh, 'GET', '/v1/admin/users?offset=-1', { token: admin.token }), 400, {
        field: 'offset',
      });
    });

    it('deletes a user: 204, every token and sign-in ends, then 404', async () => {
      const victim = await quickUser(mesh);
      const del = await api(mesh, 'DELETE', `/v1/admin/users/${victim.userId}`, { token: admin.token });
      expect(del.status).toBe(204);
      expectProblem(await api(mesh, 'GET', '/v1/auth/me', { token: victim.token }), 401);
      expectProblem(await signIn(victim.email), 401);
      expectProblem(
        await api(mesh, 'DELETE', `/v1/admin/users/${victim.userId}`, { token: admin.token }),
        404,
      );
      expectProblem(
        await api(mesh, 'DELETE', `/v1/admin/users/${admin.userId}`, { token: admin.token }),
        403,
      );
      expectProblem(await api(mesh, 'DELETE', '/v1/admin/users/nope', { token: admin.token }), 400, {
        field: 'user_id',
      });
      const total = (await api(mesh, 'GET', '/v1/admin/users?limit=1', { token: admin.token })).body['total'];
      const newest = `/v1/admin/users?limit=1000&offset=${Math.max(0, (total as number) - 500)}`;
      const users = (await api(mesh, 'GET', newest, { token: admin.token })).body['users'] as Array<{
        id: string;
      }>;
      expect(users.map((u) => u.id)).not.toContain(victim.userId);
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: admin.token })).status).toBe(200);
    });

    it('stores settings as strings: put, get, list, with names and values validated', async () => {
      const name = 'guardrail_changes_require_approval';
      const put = await api(mesh, 'PUT', `/v1/admin/settings/${name}`, {
        token: admin.token,
        // "false", the default: "true" would hold other specs' widening guardrail edits on the
        // shared mesh for approval (guardrail-revisions.spec tests "true" on a mesh of its own).
        body: { value: 'false' },
      });
      expect(put.status).toBe(200);
      expect(put.body).toEqual({
        name,
        value: 'false',
        updated_by: admin.userId,
        updated_at: expect.any(String),
      });
      expect((await api(mesh, 'GET', `/v1/admin/settings/${name}`, { token: admin.token })).body).toEqual(
        put.body,
      );

      const free = await api(mesh, 'PUT', '/v1/admin/settings/motd.text', {
        token: admin.token,
        body: { value: 'x'.repeat(4096) },
      });
      expect(free.status).toBe(200);
      const list = await api(mesh, 'GET', '/v1/admin/settings', { token: admin.token });
      expect(list.status).toBe(200);
      expect((list.body['settings'] as Array<{ name: string }>).map((s) => s.name)).toEqual([
        name,
        'motd.text',
      ]);

      const bad = (path: string, body: unknown) => api(mesh, 'PUT', path, { token: admin.token, body });
      expectProblem(await bad(`/v1/admin/settings/${name}`, { value: 'yes' }), 400, { field: 'value' });
      expectProblem(await bad(`/v1/admin/settings/${name}`, { value: true }), 400, { field: 'value' });
      expectProblem(await bad(`/v1/admin/settings/${name}`, {}), 400, { field: 'value' });
      expectProblem(await bad('/v1/admin/settings/motd.text', { value: 'x'.repeat(4097) }), 400, {
        field: 'value',
      });
      expectProblem(await bad('/v1/admin/settings/Bad%20Name', { value: 'v' }), 400, { field: 'name' });
      expectProblem(await bad(`/v1/admin/settings/${'n'.repeat(65)}`, { value: 'v' }), 400, {
        field: 'name',
      });
      expect(
        (await api(mesh, 'GET', `/v1/admin/settings/${name}`, { token: admin.token })).body,
      ).toMatchObject({
        value: 'false',
      });
    });
  });
});
