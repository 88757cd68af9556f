import { randomBytes } from 'node:crypto';
import { type SmtpCapture } from '@custos/testing';
import { waitFor } from '@custos/service-kit/testing';
import { TEST_PASSWORD, api, expectProblem, quickUser } from '../src/api';
import { sqlOn } from '../src/db';
import { sharedMail, sharedMesh, type Mesh } from '../src/mesh';

type User = Awaited<ReturnType<typeof quickUser>>;
type Reply = Awaited<ReturnType<typeof api>>;

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';

/** A request to the gateway, optionally naming a client address in X-Forwarded-For. */
async function call(
  mesh: Mesh,
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; xff?: string } = {},
): Promise<Reply> {
  const res = await fetch(`${mesh.baseUrl}${path}`, {
    method,
    headers: {
      ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
      ...(opts.xff ? { 'x-forwarded-for': opts.xff } : {}),
    },
    ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
  });
  const text = await res.text();
  let body: Record<string, unknown> = {};
  try {
    body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    body = { text };
  }
  return { status: res.status, body, headers: res.headers };
}

/** An IP-filter refusal: 403 problem details of type `ip_denied`. */
function expectIpDenied(r: Reply): void {
  expectProblem(r, 403, { type: 'ip_denied' });
}

interface AuditRow {
  payload: {
    org_id: string;
    actor_type: string;
    actor_id: string | null;
    action: string;
    resource_type: string;
    resource_id: string | null;
    metadata: Record<string, unknown>;
    client_ip: string | null;
  };
}

/** The audit records the policy service wrote for an org, oldest first. */
const auditOf = (mesh: Mesh, orgId: string) =>
  sqlOn<AuditRow>(
    mesh,
    `SELECT payload FROM policy.outbox WHERE name = 'audit.recorded' AND org_id = $1 ORDER BY seq`,
    [orgId],
  );

describe('IP rules behind a trusted proxy (X-Forwarded-For names the client)', () => {
  let mesh: Mesh;
  let smtp: SmtpCapture;

  beforeAll(async () => {
    // TRUSTED_PROXIES=127.0.0.1/32: the tests stand in for a proxy on loopback.
    mesh = await sharedMesh();
    smtp = sharedMail();
  });
  afterAll(async () => {
    await mesh?.stop();
    await smtp?.close();
  });

  /** Invites a new address into `inviter`'s org with a role and signs it in. */
  async function member(role: 'member' | 'admin', inviter: User): Promise<User> {
    const email = `ip-${randomBytes(4).toString('hex')}@example.com`;
    const r = await api(mesh, 'POST', '/v1/org/invite', { token: inviter.token, body: { email, role } });
    expect(r.status).toBe(200);
    const mail = smtp.messages.find((m) => m.to === email);
    const token = decodeURIComponent(/accept-invite\?token=(\S+)/.exec(mail!.text)![1]!);
    const accepted = await api(mesh, 'POST', '/v1/org/invites/accept', {
      body: { token, password: TEST_PASSWORD },
    });
    expect(accepted.status).toBe(201);
    const login = await api(mesh, 'POST', '/v1/auth/token', { body: { email, password: TEST_PASSWORD } });
    expect(login.status).toBe(200);
    return {
      email,
      token: login.body['access_token'] as string,
      userId: accepted.body['user_id'] as string,
      orgId: inviter.orgId,
    };
  }

  /** Registers an agent of the owner's org and exchanges its key for a token. */
  async function agentToken(owner: User): Promise<{ id: string; token: string }> {
    const created = await api(mesh, 'POST', '/v1/agents', {
      token: owner.token,
      body: { name: `bot-${randomBytes(3).toString('hex')}` },
    });
    expect(created.status).toBe(201);
    const id = (created.body['agent'] as { id: string }).id;
    const t = await api(mesh, 'POST', '/v1/auth/agent-token', {
      body: { agent_id: id, api_key: created.body['api_key'] },
    });
    expect(t.status).toBe(200);
    return { id, token: t.body['access_token'] as string };
  }

  const list = (token: string, xff?: string) =>
    call(mesh, 'GET', '/v1/security/ip-rules', { token, ...(xff ? { xff } : {}) });
  const create = (token: string | undefined, body: unknown, xff?: string) =>
    call(mesh, 'POST', '/v1/security/ip-rules', {
      ...(token ? { token } : {}),
      body,
      ...(xff ? { xff } : {}),
    });
  const remove = (token: string | undefined, id: string, xff?: string) =>
    call(mesh, 'DELETE', `/v1/security/ip-rules/${id}`, {
      ...(token ? { token } : {}),
      ...(xff ? { xff } : {}),
    });
  const rowsOf = (orgId: string) =>
    sqlOn(mesh, `SELECT * FROM policy.ip_rules WHERE org_id = $1 ORDER BY created_at, id`, [orgId]);

  /** Creates a rule as `owner` (from `xff` when given) and returns its id. */
  async function rule(owner: User, body: Record<string, unknown>, xff?: string): Promise<string> {
    const r = await create(owner.token, body, xff);
    expect({ status: r.status, body: r.body }).toMatchObject({ status: 201 });
    return r.body['id'] as string;
  }

  describe('managing rules', () => {
    it('creates, lists and deletes rules in the reference shape, normalising the CIDR', async () => {
      const owner = await quickUser(mesh);
      const created = await create(owner.token, {
        cidr: '198.51.100.77/24',
        rule_type: 'block',
        description: 'scanner',
      });
      expect(created.status).toBe(201);
      expect(created.body).toEqual({
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        org_id: owner.orgId,
        cidr: '198.51.100.0/24',
        rule_type: 'block',
        description: 'scanner',
        created_by: owner.userId,
        created_by_type: 'user',
        created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      });
      // `deny` (the 0.53 name) is stored as block; an IPv6 host becomes a /128 in short form.
      const second = await create(owner.token, { cidr: '2001:DB8:0:0:0:0:0:1', rule_type: 'deny' });
      expect(second.status).toBe(201);
      expect(second.body).toMatchObject({ cidr: '2001:db8::1/128', rule_type: 'block', description: '' });

      const listed = await list(owner.token);
      expect(listed.status).toBe(200);
      expect(listed.body).toEqual({ rules: [created.body, second.body] });
      expect((await rowsOf(owner.orgId)).map((r) => [r['cidr'], r['rule_type']])).toEqual([
        ['198.51.100.0/24', 'block'],
        ['2001:db8::1/128', 'block'],
      ]);

      const deleted = await remove(owner.token, created.body['id'] as string);
      expect(deleted.status).toBe(204);
      expect((await list(owner.token)).body).toEqual({ rules: [second.body] });
      expectProblem(await remove(owner.token, created.body['id'] as string), 404);
    });

    it('lets an admin manage rules, and keeps each org to its own rules', async () => {
      const owner = await quickUser(mesh);
      const admin = await member('admin', owner);
      const id = await rule(admin, { cidr: '192.0.2.0/24', rule_type: 'block' });
      expect((await list(admin.token)).body['rules']).toEqual([
        expect.objectContaining({ id, created_by: admin.userId }),
      ]);
      const stranger = await quickUser(mesh);
      expect((await list(stranger.token)).body).toEqual({ rules: [] });
      expectProblem(await remove(stranger.token, id), 404);
      expect(await rowsOf(owner.orgId)).toHaveLength(1);
      expect((await remove(admin.token, id)).status).toBe(204);
    });

    it('refuses bad input with a 400 naming the field, and changes nothing', async () => {
      const owner = await quickUser(mesh);
      await rule(owner, { cidr: '203.0.113.0/24', rule_type: 'block' });
      const cases: Array<[unknown, string]> = [
        [{ rule_type: 'allow' }, 'cidr'],
        [{ cidr: 'not-an-ip', rule_type: 'allow' }, 'cidr'],
        [{ cidr: '10.0.0.0/33', rule_type: 'allow' }, 'cidr'],
        [{ cidr: '2001:db8::/129', rule_type: 'allow' }, 'cidr'],
        [{ cidr: 10, rule_type: 'allow' }, 'cidr'],
        [{ cidr: '10.0.0.0/8' }, 'rule_type'],
        [{ cidr: '10.0.0.0/8', rule_type: 'permit' }, 'rule_type'],
        [{ cidr: '10.0.0.0/8', rule_type: 'allow', description: 'x'.repeat(1001) }, 'description'],
        [{ cidr: '10.0.0.0/8', rule_type: 'allow', description: 7 }, 'description'],
        [{ cidr: '10.0.0.0/8', rule_type: 'allow', label: 'office' }, 'label'],
        [['10.0.0.0/8'], 'body'],
      ];
      const before = (await auditOf(mesh, owner.orgId)).length;
      for (const [body, field] of cases) {
        const r = await create(owner.token, body);
        expectProblem(r, 400, { field });
        expect(JSON.stringify(r.body)).not.toMatch(/at .*\.js|stack/i);
      }
      const dup = await create(owner.token, { cidr: '203.0.113.5/24', rule_type: 'block' });
      expectProblem(dup, 409, { field: 'cidr' });
      expect(await rowsOf(owner.orgId)).toHaveLength(1);
      expect(await auditOf(mesh, owner.orgId)).toHaveLength(before);
    });

    it('refuses members and agents (403), unknown ids (404) and anonymous callers (401)', async () => {
      const owner = await quickUser(mesh);
      const id = await rule(owner, { cidr: '203.0.113.0/24', rule_type: 'block' });
      const plain = await member('member', owner);
      const bot = await agentToken(owner);
      const before = (await auditOf(mesh, owner.orgId)).length;
      for (const token of [plain.token, bot.token]) {
        expectProblem(await list(token), 403);
        expectProblem(await create(token, { cidr: '10.0.0.0/8', rule_type: 'allow' }), 403);
        expectProblem(await remove(token, id), 403);
      }
      expectProblem(await remove(owner.token, UNKNOWN_ID), 404);
      expectProblem(await remove(owner.token, 'not-a-uuid'), 404);
      expectProblem(await call(mesh, 'GET', '/v1/security/ip-rules'), 401);
      expectProblem(await create(undefined, { cidr: '10.0.0.0/8', rule_type: 'allow' }), 401);
      expectProblem(await remove(undefined, id), 401);
      expectProblem(await list('not-a-jwt'), 401);
      expect((await rowsOf(owner.orgId)).map((r) => r['id'])).toEqual([id]);
      expect(await auditOf(mesh, owner.orgId)).toHaveLength(before);
    });
  });

  describe('the IP filter', () => {
    it('refuses a client a block rule covers, for users and agents of that org only', async () => {
      const owner = await quickUser(mesh);
      const bot = await agentToken(owner);
      const other = await quickUser(mesh);
      const blockId = await rule(owner, { cidr: '203.0.113.0/24', rule_type: 'block' });

      expectIpDenied(await call(mesh, 'GET', '/v1/vaults', { token: owner.token, xff: '203.0.113.9' }));
      expectIpDenied(await call(mesh, 'GET', '/v1/agents/me', { token: bot.token, xff: '203.0.113.200' }));
      expectIpDenied(
        await call(mesh, 'POST', '/v1/vaults', {
          token: owner.token,
          xff: '203.0.113.9',
          body: { name: 'x' },
        }),
      );
      // The refused request changed nothing.
      expect((await call(mesh, 'GET', '/v1/vaults', { token: owner.token })).body['vaults']).toEqual([]);
      expect((await call(mesh, 'GET', '/v1/vaults', { token: owner.token, xff: '203.0.114.9' })).status).toBe(
        200,
      );
      expect((await call(mesh, 'GET', '/v1/vaults', { token: other.token, xff: '203.0.113.9' })).status).toBe(
        200,
      );
      // Public routes are not filtered; a missing token is still a 401 (auth runs first).
      expect((await call(mesh, 'GET', '/v1/health', { xff: '203.0.113.9' })).status).toBe(200);
      const login = await call(mesh, 'POST', '/v1/auth/token', {
        xff: '203.0.113.9',
        body: { email: owner.email, password: TEST_PASSWORD },
      });
      expect(login.status).toBe(200);
      expectProblem(await call(mesh, 'GET', '/v1/vaults', { xff: '203.0.113.9' }), 401);

      // Deleting the rule lifts the block at once on this gateway.
      expect((await remove(owner.token, blockId)).status).toBe(204);
      expect((await call(mesh, 'GET', '/v1/vaults', { token: owner.token, xff: '203.0.113.9' })).status).toBe(
        200,
      );
    });

    it('with allow rules, admits only the clients they cover (IPv4-mapped clients included)', async () => {
      const owner = await quickUser(mesh);
      const office = '10.20.30.40';
      const allowId = await rule(owner, { cidr: '10.0.0.0/8', rule_type: 'allow' }, office);
      const get = (xff?: string) =>
        call(mesh, 'GET', '/v1/vaults', { token: owner.token, ...(xff ? { xff } : {}) });

      expect((await get(office)).status).toBe(200);
      expect((await get('10.255.0.1')).status).toBe(200);
      expect((await get('::ffff:10.1.2.3')).status).toBe(200);
      expectIpDenied(await get('192.0.2.1'));
      expectIpDenied(await get('2001:db8::1'));
      expectIpDenied(await get()); // the proxy itself, 127.0.0.1
      // The rule routes are filtered too: managing rules needs an admitted address.
      expectIpDenied(await list(owner.token, '192.0.2.1'));

      // A block rule wins over an allow rule that covers the same client.
      await rule(owner, { cidr: '10.9.0.0/16', rule_type: 'block' }, office);
      expectIpDenied(await get('10.9.8.7'));
      expect((await get('10.8.8.7')).status).toBe(200);

      expect((await remove(owner.token, allowId, office)).status).toBe(204);
      expect((await get()).status).toBe(200);
      expectIpDenied(await get('10.9.8.7'));
    });

    it('matches IPv6 clients', async () => {
      const owner = await quickUser(mesh);
      const home = '2001:db8:1::10';
      await rule(owner, { cidr: '2001:db8::/32', rule_type: 'allow' }, home);
      await rule(owner, { cidr: '2001:db8:bad::/48', rule_type: 'block' }, home);
      const get = (xff: string) => call(mesh, 'GET', '/v1/vaults', { token: owner.token, xff });
      expect((await get(home)).status).toBe(200);
      expect((await get('2001:DB8:0:0:0:0:0:1')).status).toBe(200);
      expectIpDenied(await get('2001:db8:bad::1'));
      expectIpDenied(await get('2001:db9::1'));
      expectIpDenied(await get('198.51.100.1'));
    });
  });

  describe('audit', () => {
    it('records ip_rule.created and ip_rule.deleted in the policy outbox', async () => {
      const owner = await quickUser(mesh);
      const id = await rule(owner, { cidr: '192.0.2.0/24', rule_type: 'block', description: 'lab' });
      expect((await remove(owner.token, id)).status).toBe(204);
      const rows = (await auditOf(mesh, owner.orgId)).map((r) => r.payload);
      const expected = (action: string) => ({
        org_id: owner.orgId,
        actor_type: 'user',
        actor_id: owner.userId,
        action,
        resource_type: 'ip_rule',
        resource_id: id,
        metadata: { cidr: '192.0.2.0/24', rule_type: 'block' },
        client_ip: '127.0.0.1',
      });
      expect(rows).toEqual([
        expect.objectContaining(expected('ip_rule.created')),
        expect.objectContaining(expected('ip_rule.deleted')),
      ]);
    });

    it('records policy.created, policy.updated and policy.deleted for grant changes', async () => {
      const owner = await quickUser(mesh);
      const v = await api(mesh, 'POST', '/v1/vaults', { token: owner.token, body: { name: 'audited' } });
      expect(v.status).toBe(201);
      const vaultId = v.body['id'] as string;
      const created = await api(mesh, 'POST', `/v1/vaults/${vaultId}/policies`, {
        token: owner.token,
        body: {
          secret_path_pattern: 'prod/**',
          principal_type: 'user',
          principal_id: owner.userId,
          permissions: ['read'],
        },
      });
      expect(created.status).toBe(201);
      const policyId = created.body['id'] as string;
      const updated = await api(mesh, 'PUT', `/v1/vaults/${vaultId}/policies/${policyId}`, {
        token: owner.token,
        body: { permissions: ['read', 'write'] },
      });
      expect(updated.status).toBe(200);
      const deleted = await api(mesh, 'DELETE', `/v1/vaults/${vaultId}/policies/${policyId}`, {
        token: owner.token,
      });
      expect(deleted.status).toBe(204);

      const rows = (await auditOf(mesh, owner.orgId)).map((r) => r.payload);
      const base = {
        org_id: owner.orgId,
        actor_type: 'user',
        actor_id: owner.userId,
        resource_type: 'policy',
        resource_id: policyId,
      };
      expect(rows).toEqual([
        expect.objectContaining({
          ...base,
          action: 'policy.created',
          metadata: expect.objectContaining({ vault_id: vaultId, permissions: ['read'] }),
        }),
        expect.objectContaining({
          ...base,
          action: 'policy.updated',
          metadata: expect.objectContaining({ permissions: ['read', 'write'], changed: ['permissions'] }),
        }),
        expect.objectContaining({ ...base, action: 'policy.deleted' }),
      ]);
    });

    it('records each refusal as ip_rule.denied in the audit log', async () => {
      const owner = await quickUser(mesh);
      const bot = await agentToken(owner);
      const blockId = await rule(owner, { cidr: '198.51.100.0/24', rule_type: 'block' });
      await rule(owner, { cidr: '10.0.0.0/8', rule_type: 'allow' }, '10.0.0.1');
      expectIpDenied(await call(mesh, 'GET', '/v1/vaults', { token: owner.token, xff: '198.51.100.23' }));
      expectIpDenied(await call(mesh, 'GET', '/v1/agents/me', { token: bot.token, xff: '192.0.2.5' }));

      type Event = Record<string, unknown> & { details: Record<string, unknown> };
      let events: Event[] = [];
      await waitFor(
        async () => {
          const r = await call(mesh, 'GET', '/v1/audit/events?action=ip_rule.denied', {
            token: owner.token,
            xff: '10.0.0.1',
          });
          events = (r.body['events'] as Event[] | undefined) ?? [];
          return r.status === 200 && events.length === 2;
        },
        30000,
        250,
      );
      const byActor = (id: string) => events.find((e) => e['actor_id'] === id);
      expect(byActor(owner.userId)).toMatchObject({
        org_id: owner.orgId,
        action: 'ip_rule.denied',
        actor_type: 'user',
        resource_type: 'route',
        resource_id: 'GET /v1/vaults',
        ip_address: '198.51.100.23',
        details: { method: 'GET', path: '/v1/vaults', rule_id: blockId, reason: 'blocked' },
      });
      expect(byActor(bot.id)).toMatchObject({
        org_id: owner.orgId,
        action: 'ip_rule.denied',
        actor_type: 'agent',
        resource_type: 'route',
        resource_id: 'GET /v1/agents/me',
        ip_address: '192.0.2.5',
        details: { method: 'GET', path: '/v1/agents/me', reason: 'not_allowed' },
      });
      expect(byActor(bot.id)!.details).not.toHaveProperty('rule_id');
    });
  });
});

describe('IP rules with no trusted proxy (X-Forwarded-For is ignored)', () => {
  let mesh: Mesh;

  beforeAll(async () => {
    // No TRUSTED_PROXIES, as the services default to.
    mesh = await sharedMesh('strict');
  });
  afterAll(() => mesh?.stop());

  it('a spoofed X-Forwarded-For does not get past a block rule', async () => {
    const owner = await quickUser(mesh);
    const r = await call(mesh, 'POST', '/v1/security/ip-rules', {
      token: owner.token,
      body: { cidr: '127.0.0.1', rule_type: 'block' },
    });
    expect(r.status).toBe(201);
    expectIpDenied(await call(mesh, 'GET', '/v1/vaults', { token: owner.token }));
    expectIpDenied(await call(mesh, 'GET', '/v1/vaults', { token: owner.token, xff: '198.51.100.7' }));
    expectIpDenied(
      await call(mesh, 'GET', '/v1/vaults', { token: owner.token, xff: '198.51.100.7, 10.0.0.1' }),
    );
  });

  it('a spoofed X-Forwarded-For does not satisfy an allow rule', async () => {
    const owner = await quickUser(mesh);
    const r = await call(mesh, 'POST', '/v1/security/ip-rules', {
      token: owner.token,
      body: { cidr: '198.51.100.0/24', rule_type: 'allow' },
    });
    expect(r.status).toBe(201);
    expectIpDenied(await call(mesh, 'GET', '/v1/vaults', { token: owner.token, xff: '198.51.100.7' }));
    expectIpDenied(await call(mesh, 'GET', '/v1/security/ip-rules', { token: owner.token }));
    // Another org without rules is unaffected.
    const other = await quickUser(mesh);
    expect((await call(mesh, 'GET', '/v1/vaults', { token: other.token, xff: '198.51.100.7' })).status).toBe(
      200,
    );
  });
});
