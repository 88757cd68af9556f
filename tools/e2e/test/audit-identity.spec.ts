import { randomBytes } from 'node:crypto';
import { type SmtpCapture } from '@custos/testing';
import { waitFor } from '@custos/service-kit/testing';
import { TEST_PASSWORD, api, quickUser } from '../src/api';
import { currentStep, totp } from '../src/totp';
import { sqlOn } from '../src/db';
import { sharedMail, sharedMesh, type Mesh } from '../src/mesh';

type User = Awaited<ReturnType<typeof quickUser>>;
type Payload = Record<string, unknown> & { action: string; metadata: Record<string, unknown> };

const NEW_PASSWORD = 'Another-Horse-7-staple';
const GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
const JWT_TYPE = 'urn:ietf:params:oauth:token-type:jwt';
const AUDIENCE = 'https://rp.example.com';

describe('identity writes an audit record for every security-relevant change and sign-in', () => {
  let mesh: Mesh;
  let smtp: SmtpCapture;
  let owner: User;
  /** Every credential the tests handle: none may appear in any audit record. */
  const secrets: string[] = [TEST_PASSWORD, NEW_PASSWORD];
  /** Six-digit codes (TOTP, e-mail change): none may appear as a value in any audit record. */
  const codes: string[] = [];

  beforeAll(async () => {
    mesh = await sharedMesh();
    smtp = sharedMail();
    owner = await user();
  });
  afterAll(async () => {
    await mesh?.stop();
    await smtp?.close();
  });

  const newEmail = () => `audit-${randomBytes(5).toString('hex')}@example.com`;

  async function user(): Promise<User> {
    const u = await quickUser(mesh);
    secrets.push(u.token);
    return u;
  }

  async function login(email: string, password = TEST_PASSWORD) {
    const r = await api(mesh, 'POST', '/v1/auth/token', { body: { email, password } });
    for (const k of ['access_token', 'refresh_token', 'mfa_token'])
      if (typeof r.body[k] === 'string') secrets.push(r.body[k]);
    return r;
  }

  /** The audit payloads identity has written to its outbox that match `where`, oldest first. */
  async function records(where: Record<string, unknown>): Promise<Payload[]> {
    const rows = await sqlOn<{ payload: Payload }>(
      mesh,
      `select payload from identity.outbox where name = 'audit.recorded' and payload @> $1::jsonb order by seq`,
      [JSON.stringify(where)],
    );
    return rows.map((r) => r.payload);
  }

  /**
   * Waits for exactly the expected number of records matching `where` (failed sign-ins are written
   * after the answer) and checks the fields every record carries; returns the last one.
   */
  async function expectAudit(where: Record<string, unknown>, count = 1): Promise<Payload> {
    let found: Payload[] = [];
    await waitFor(async () => {
      found = await records(where);
      return found.length >= count;
    }, 10000).catch(() => {
      throw new Error(`expected ${count} audit records like ${JSON.stringify(where)}, found ${found.length}`);
    });
    expect(found).toHaveLength(count);
    const last = found[found.length - 1]!;
    expect(last).toMatchObject({
      action: expect.any(String),
      actor_type: expect.stringMatching(/^(user|agent|system|anonymous)$/),
      org_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      resource_type: expect.any(String),
      client_ip: expect.stringMatching(/.+/),
      request_id: expect.stringMatching(/.+/),
      occurred_at: expect.any(String),
    });
    expect(Object.keys(last)).toEqual(
      expect.arrayContaining(['actor_id', 'resource_id', 'metadata', 'client_ip', 'request_id']),
    );
    return last;
  }

  const asUser = (u: User) => ({ org_id: u.orgId, actor_type: 'user', actor_id: u.userId });

  describe('sign-in, sessions and refusals', () => {
    it('records signup, password sign-in, and a failed sign-in of a known account only', async () => {
      const u = await user();
      await expectAudit({
        action: 'user.created',
        ...asUser(u),
        resource_type: 'user',
        resource_id: u.userId,
      });
      await expectAudit({
        action: 'auth.login',
        ...asUser(u),
        resource_id: u.userId,
        metadata: { method: 'signup' },
      });
      expect((await login(u.email)).status).toBe(200);
      const ok = await expectAudit({
        action: 'auth.login',
        ...asUser(u),
        resource_type: 'user',
        resource_id: u.userId,
        metadata: { method: 'password', amr: ['pwd'] },
      });
      expect(ok.metadata['session_id']).toMatch(/^[0-9a-f-]{36}$/);

      const wrong = await login(u.email, `${TEST_PASSWORD}x`);
      const unknown = await login(newEmail(), `${TEST_PASSWORD}y`);
      secrets.push(`${TEST_PASSWORD}x`, `${TEST_PASSWORD}y`);
      expect(wrong.status).toBe(401);
      expect(unknown.status).toBe(401);
      expect(unknown.body).toEqual(wrong.body);
      await expectAudit({
        action: 'auth.login_failed',
        org_id: u.orgId,
        actor_type: 'anonymous',
        actor_id: null,
        resource_type: 'user',
        resource_id: u.userId,
        metadata: { method: 'password', reason: 'wrong_password' },
      });
      // The unknown address has no org to record under: nothing was written for its request (other
      // spec files share this mesh, so the records are told apart by request id, not counted).
      await new Promise((r) => setTimeout(r, 500));
      expect(await records({ request_id: wrong.headers.get('x-request-id') })).toHaveLength(1);
      expect(await records({ request_id: unknown.headers.get('x-request-id') })).toHaveLength(0);
    });

    it('records sign-out and the reuse of a refresh token', async () => {
      const u = await user();
      const s = await login(u.email);
      const access = s.body['access_token'] as string;
      const refresh = s.body['refresh_token'] as string;
      const rotated = await api(mesh, 'POST', '/v1/auth/refresh', { body: { refresh_token: refresh } });
      expect(rotated.status).toBe(200);
      secrets.push(rotated.body['access_token'] as string, rotated.body['refresh_token'] as string);
      const replay = await api(mesh, 'POST', '/v1/auth/refresh', { body: { refresh_token: refresh } });
      expect(replay.status).toBe(401);
      const session = (
        await expectAudit({ action: 'auth.login', ...asUser(u), metadata: { method: 'password' } })
      ).metadata['session_id'];
      await expectAudit({
        action: 'auth.refresh_reuse',
        org_id: u.orgId,
        actor_type: 'anonymous',
        resource_type: 'session',
        resource_id: session,
        metadata: { user_id: u.userId },
      });

      const s2 = await login(u.email);
      const access2 = s2.body['access_token'] as string;
      expect((await api(mesh, 'DELETE', '/v1/auth/token', { token: access2 })).status).toBe(204);
      expect((await api(mesh, 'GET', '/v1/auth/me', { token: access2 })).status).toBe(401);
      await expectAudit({
        action: 'auth.logout',
        ...asUser(u),
        resource_type: 'session',
        metadata: { ended: 'session' },
      });
      expect(access).not.toBe(access2);
    });

    it('records TOTP enrolment, a wrong code, the MFA sign-in and removal', async () => {
      const u = await user();
      const setup = await api(mesh, 'POST', '/v1/auth/mfa/setup', { confirm: TEST_PASSWORD, token: u.token });
      expect(setup.status).toBe(200);
      const secret = setup.body['secret'] as string;
      secrets.push(secret, setup.body['otpauth_uri'] as string);
      const step = currentStep();
      codes.push(totp(secret, step), totp(secret, step + 1), totp(secret, step + 2));
      const enabled = await api(mesh, 'POST', '/v1/auth/mfa/verify-setup', {
        token: u.token,
        body: { code: totp(secret, step) },
      });
      expect(enabled.status).toBe(200);
      const recovery = enabled.body['recovery_codes'] as string[];
      secrets.push(...recovery);
      await expectAudit({
        action: 'mfa.enabled',
        ...asUser(u),
        resource_id: u.userId,
        metadata: { recovery_code_count: 10 },
      });

      const challenge = await login(u.email);
      expect(challenge.body['mfa_required']).toBe(true);
      const mfaToken = challenge.body['mfa_token'] as string;
      const near = new Set([-2, -1, 0, 1, 2].map((d) => totp(secret, currentStep() + d)));
      const wrongCode = ['000000', '111111', '222222'].find((c) => !near.has(c))!;
      const bad = await api(mesh, 'POST', '/v1/auth/mfa/verify', {
        body: { mfa_token: mfaToken, code: wrongCode },
      });
      expect(bad.status).toBe(401);
      await expectAudit({
        action: 'auth.mfa_failed',
        org_id: u.orgId,
        actor_type: 'anonymous',
        resource_type: 'user',
        resource_id: u.userId,
        metadata: { reason: 'invalid_code' },
      });
      const good = await api(mesh, 'POST', '/v1/auth/mfa/verify', {
        body: { mfa_token: mfaToken, code: totp(secret, step + 1) },
      });
      expect(good.status).toBe(200);
      secrets.push(good.body['access_token'] as string, good.body['refresh_token'] as string);
      await expectAudit({
        action: 'auth.login',
        ...asUser(u),
        metadata: { method: 'mfa', amr: ['pwd', 'otp'] },
      });

      const off = await api(mesh, 'POST', '/v1/auth/mfa/disable', {
        confirm: TEST_PASSWORD,
        token: u.token,
        body: { code: recovery[0] },
      });
      expect(off.status).toBe(200);
      await expectAudit({ action: 'mfa.disabled', ...asUser(u), metadata: { factor: 'recovery' } });
    });
  });

  describe('account changes', () => {
    it('records re-auth, password change, reset, e-mail change, settings and deletion', async () => {
      const u = await user();
      const rat = await api(mesh, 'POST', '/v1/auth/reauth', {
        token: u.token,
        body: { purpose: 'account.delete', password: TEST_PASSWORD },
      });
      expect(rat.status).toBe(200);
      secrets.push(rat.body['token'] as string);
      await expectAudit({ action: 'reauth.issued', ...asUser(u), metadata: { purpose: 'account.delete' } });

      const changed = await api(mesh, 'POST', '/v1/auth/change-password', {
        confirm: TEST_PASSWORD,
        token: u.token,
        body: { current_password: TEST_PASSWORD, new_password: NEW_PASSWORD },
      });
      expect(changed.status).toBe(204);
      await expectAudit({ action: 'password.changed', ...asUser(u), resource_id: u.userId });

      const forgot = await api(mesh, 'POST', '/v1/auth/forgot-password', { body: { email: u.email } });
      expect(forgot.status).toBe(200);
      const mail = await smtp.waitForMessage(
        (m) => m.to === u.email && m.subject.includes('password'),
        10000,
      );
      const resetToken = /cse_[A-Za-z0-9]{16}_[A-Za-z0-9]{43}/.exec(mail.text)![0];
      secrets.push(resetToken);
      await expectAudit({
        action: 'password.reset_requested',
        org_id: u.orgId,
        actor_type: 'anonymous',
        resource_id: u.userId,
      });
      const reset = await api(mesh, 'POST', '/v1/auth/reset-password', {
        body: { token: resetToken, new_password: TEST_PASSWORD },
      });
      expect(reset.status).toBe(200);
      await expectAudit({ action: 'password.reset', ...asUser(u), metadata: { method: 'email_link' } });

      const s = await login(u.email);
      const token = s.body['access_token'] as string;
      const to = newEmail();
      const change = await api(mesh, 'POST', '/v1/auth/change-email', {
        confirm: TEST_PASSWORD,
        token,
        body: { new_email: to },
      });
      expect(change.status).toBe(200);
      const codeMail = await smtp.waitForMessage((m) => m.to === to, 10000);
      const code = /\b(\d{6})\b/.exec(codeMail.text)![1]!;
      codes.push(code);
      const verified = await api(mesh, 'POST', '/v1/auth/verify-email-change', { token, body: { code } });
      expect(verified.status).toBe(200);
      const emailRecord = await expectAudit({ action: 'email.changed', ...asUser(u), resource_id: u.userId });
      expect(JSON.stringify(emailRecord)).not.toContain(to);

      const settings = await api(mesh, 'PATCH', '/v1/auth/settings', {
        token,
        body: { require_passkey_for_vaults: false },
      });
      expect(settings.status).toBe(200);
      await expectAudit({
        action: 'account.settings_updated',
        ...asUser(u),
        metadata: { fields: ['require_passkey_for_vaults'] },
      });

      const res = await fetch(`${mesh.baseUrl}/v1/auth/me`, {
        method: 'DELETE',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'x-auth-confirm': TEST_PASSWORD,
        },
        body: JSON.stringify({ confirmation: 'DELETE MY ACCOUNT' }),
      });
      expect(res.status).toBe(204);
      await expectAudit({
        action: 'user.deleted',
        ...asUser(u),
        resource_id: u.userId,
        metadata: { by: 'self' },
      });
    });

    it('records personal API keys: creation, sign-in with one, a wrong secret, revocation', async () => {
      const created = await api(mesh, 'POST', '/v1/auth/api-keys', {
        confirm: TEST_PASSWORD,
        token: owner.token,
        body: { name: 'ci' },
      });
      expect(created.status).toBe(201);
      const key = created.body['api_key'] as string;
      const keyId =
        (created.body['key'] as Record<string, unknown> | undefined)?.['id'] ?? created.body['id'];
      secrets.push(key);
      await expectAudit({
        action: 'api_key.created',
        ...asUser(owner),
        resource_type: 'api_key',
        resource_id: keyId,
      });

      const t = await api(mesh, 'POST', '/v1/auth/api-key-token', { body: { api_key: key } });
      expect(t.status).toBe(200);
      secrets.push(t.body['access_token'] as string);
      await expectAudit({
        action: 'auth.login',
        ...asUser(owner),
        metadata: { method: 'api_key', key_id: keyId },
      });

      const forged = `${key.slice(0, -4)}${key.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
      secrets.push(forged);
      expect((await api(mesh, 'POST', '/v1/auth/api-key-token', { body: { api_key: forged } })).status).toBe(
        401,
      );
      await expectAudit({
        action: 'auth.login_failed',
        org_id: owner.orgId,
        actor_type: 'anonymous',
        resource_id: owner.userId,
        metadata: { method: 'api_key', reason: 'wrong_secret' },
      });

      expect(
        (await api(mesh, 'DELETE', `/v1/auth/api-keys/${String(keyId)}`, { token: owner.token })).status,
      ).toBe(204);
      await expectAudit({ action: 'api_key.revoked', ...asUser(owner), resource_id: keyId });
    });
  });

  describe('agents, router keys and federation', () => {
    it('records an agent’s life: creation, update (field names), key exchange, rotation, deactivation', async () => {
      const created = await api(mesh, 'POST', '/v1/agents', {
        token: owner.token,
        body: {
          name: 'auditor',
          scopes: ['prod/**'],
          federation_enabled: true,
          federation_audiences: [AUDIENCE],
        },
      });
      expect(created.status).toBe(201);
      const agentId = String((created.body['agent'] as Record<string, unknown>)['id']);
      const apiKey = created.body['api_key'] as string;
      secrets.push(apiKey);
      const agentRecord = { org_id: owner.orgId, resource_type: 'agent', resource_id: agentId };
      await expectAudit({ action: 'agent.created', ...asUser(owner), ...agentRecord });

      const patched = await api(mesh, 'PATCH', `/v1/agents/${agentId}`, {
        confirm: TEST_PASSWORD,
        token: owner.token,
        body: { description: 'top secret description', token_ttl_seconds: 600 },
      });
      expect(patched.status).toBe(200);
      const update = await expectAudit({ action: 'agent.updated', ...asUser(owner), ...agentRecord });
      expect(update.metadata).toEqual({ fields: ['description', 'token_ttl_seconds'] });

      const t = await api(mesh, 'POST', '/v1/auth/agent-token', {
        body: { agent_id: agentId, api_key: apiKey },
      });
      expect(t.status).toBe(200);
      const jwt = t.body['access_token'] as string;
      secrets.push(jwt);
      await expectAudit({
        action: 'auth.login',
        org_id: owner.orgId,
        actor_type: 'agent',
        actor_id: agentId,
        resource_id: agentId,
        metadata: { method: 'agent_api_key' },
      });

      const fed = await api(mesh, 'POST', '/v1/auth/federated-token', {
        body: { grant_type: GRANT, subject_token: jwt, subject_token_type: JWT_TYPE, audience: AUDIENCE },
      });
      expect(fed.status).toBe(200);
      secrets.push(fed.body['access_token'] as string);
      await expectAudit({
        action: 'auth.login',
        actor_type: 'agent',
        actor_id: agentId,
        metadata: { method: 'federated', audience: AUDIENCE, subject_token_type: 'jwt' },
      });

      const forged = `${apiKey.slice(0, -4)}${apiKey.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
      secrets.push(forged);
      const refused = await api(mesh, 'POST', '/v1/auth/agent-token', {
        body: { agent_id: agentId, api_key: forged },
      });
      expect(refused.status).toBe(401);
      await expectAudit({
        action: 'auth.login_failed',
        actor_type: 'anonymous',
        ...agentRecord,
        metadata: { method: 'agent_api_key', reason: 'wrong_secret' },
      });

      const rotated = await api(mesh, 'POST', `/v1/agents/${agentId}/rotate-key`, {
        confirm: TEST_PASSWORD,
        token: owner.token,
      });
      expect(rotated.status).toBe(200);
      secrets.push(rotated.body['api_key'] as string);
      await expectAudit({ action: 'agent.key_rotated', ...asUser(owner), ...agentRecord });

      expect((await api(mesh, 'DELETE', `/v1/agents/${agentId}`, { token: owner.token })).status).toBe(204);
      await expectAudit({ action: 'agent.deactivated', ...asUser(owner), ...agentRecord });
    });

    it('records router keys: creation, exchange and revocation', async () => {
      const created = await api(mesh, 'POST', '/v1/agents', {
        token: owner.token,
        body: { name: 'router', proxy_enabled: true },
      });
      expect(created.status).toBe(201);
      const agentId = String((created.body['agent'] as Record<string, unknown>)['id']);
      secrets.push(created.body['api_key'] as string);
      const k = await api(mesh, 'POST', `/v1/agents/${agentId}/router-keys`, {
        confirm: TEST_PASSWORD,
        token: owner.token,
        body: {},
      });
      expect(k.status).toBe(201);
      const routerKey = (k.body['router_key'] ?? k.body['api_key']) as string;
      const keyId = String(k.body['id'] ?? (k.body['key'] as Record<string, unknown>)['id']);
      secrets.push(routerKey);
      await expectAudit({
        action: 'router_key.created',
        ...asUser(owner),
        resource_type: 'router_key',
        resource_id: keyId,
        metadata: { agent_id: agentId },
      });
      const t = await api(mesh, 'POST', '/v1/auth/agent-token', { body: { api_key: routerKey } });
      expect(t.status).toBe(200);
      secrets.push(t.body['access_token'] as string);
      await expectAudit({
        action: 'auth.login',
        actor_type: 'agent',
        actor_id: agentId,
        metadata: { method: 'router_key', router_key_id: keyId },
      });
      const del = await api(mesh, 'DELETE', `/v1/agents/${agentId}/router-keys/${keyId}`, {
        token: owner.token,
      });
      expect(del.status).toBe(204);
      await expectAudit({ action: 'router_key.revoked', ...asUser(owner), resource_id: keyId });
    });
  });

  describe('orgs', () => {
    it('records invitations, their acceptance, role changes, removal and sub-orgs', async () => {
      const org = await user();
      const email = newEmail();
      const invited = await api(mesh, 'POST', '/v1/org/invite', {
        token: org.token,
        body: { email, role: 'member' },
      });
      expect(invited.status).toBe(200);
      const invite = await expectAudit({
        action: 'org.member_invited',
        ...asUser(org),
        resource_type: 'org_invite',
        metadata: { role: 'member' },
      });
      expect(JSON.stringify(invite)).not.toContain(email);
      const mail = await smtp.waitForMessage((m) => m.to === email, 10000);
      const token = decodeURIComponent(/accept-invite\?token=(\S+)/.exec(mail.text)![1]!);
      secrets.push(token);
      const accepted = await api(mesh, 'POST', '/v1/org/invites/accept', {
        body: { token, password: TEST_PASSWORD },
      });
      expect(accepted.status).toBe(201);
      const memberId = accepted.body['user_id'] as string;
      await expectAudit({
        action: 'org.invite_accepted',
        org_id: org.orgId,
        actor_type: 'user',
        actor_id: memberId,
        metadata: { invite_id: invite['resource_id'], role: 'member', invited_by: org.userId },
      });

      const role = await api(mesh, 'PATCH', `/v1/org/members/${memberId}`, {
        confirm: TEST_PASSWORD,
        token: org.token,
        body: { role: 'admin' },
      });
      expect(role.status).toBe(200);
      await expectAudit({
        action: 'org.member_role_changed',
        ...asUser(org),
        resource_type: 'user',
        resource_id: memberId,
        metadata: { from_role: 'member', to_role: 'admin' },
      });
      expect((await api(mesh, 'DELETE', `/v1/org/members/${memberId}`, { token: org.token })).status).toBe(
        204,
      );
      await expectAudit({ action: 'org.member_removed', ...asUser(org), resource_id: memberId });

      const sub = await api(mesh, 'POST', '/v1/org/sub-orgs', { token: org.token, body: { name: 'Team B' } });
      expect(sub.status).toBe(201);
      await expectAudit({
        action: 'org.sub_org_created',
        ...asUser(org),
        resource_type: 'org',
        resource_id: sub.body['id'],
      });
    });
  });

  it('never writes a password, key, token, TOTP secret or code into an audit record', async () => {
    const all = await records({});
    expect(all.length).toBeGreaterThan(30);
    const text = JSON.stringify(all);
    for (const s of secrets.filter((x) => typeof x === 'string' && x.length >= 8)) {
      expect(text.includes(s)).toBe(false);
    }
    for (const c of codes) expect(text.includes(`"${c}"`)).toBe(false);
  });

  it('hands the records to the audit service, where an owner can list them', async () => {
    for (const action of ['auth.login', 'api_key.created', 'agent.created']) {
      await waitFor(
        async () => {
          const r = await api(mesh, 'GET', `/v1/audit/events?limit=1000&action=${action}`, {
            token: owner.token,
          });
          if (r.status !== 200) return false;
          return (r.body['events'] as Array<Record<string, unknown>>).some((e) => e['action'] === action);
        },
        30000,
        250,
      );
    }
  });
});
