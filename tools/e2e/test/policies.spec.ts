import { randomBytes } from 'node:crypto';
import { type SmtpCapture } from '@custos/testing';
import { TEST_PASSWORD, api, expectProblem, quickUser } from '../src/api';
import { sqlOn } from '../src/db';
import { sharedMail, sharedMesh, type Mesh } from '../src/mesh';

type User = Awaited<ReturnType<typeof quickUser>>;
type Reply = Awaited<ReturnType<typeof api>>;

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';

describe('policies: managing grants on a vault, and the decisions they make', () => {
  let mesh: Mesh;
  let smtp: SmtpCapture;
  let owner: User;

  beforeAll(async () => {
    // TRUSTED_PROXIES=127.0.0.1/32: the tests stand in for a proxy on loopback.
    mesh = await sharedMesh();
    smtp = sharedMail();
    owner = await quickUser(mesh);
  });
  afterAll(async () => {
    await mesh?.stop();
    await smtp?.close();
  });

  /** Invites a new address into `inviter`'s org with a role and signs it in. */
  async function member(role: 'member' | 'admin', inviter: User = owner): Promise<User> {
    const email = `p-${randomBytes(4).toString('hex')}@example.com`;
    const r = await api(mesh, 'POST', '/v1/org/invite', { token: inviter.token, body: { email, role } });
    expect(r.status).toBe(200);
    const mail = smtp.messages.find((m) => m.to === email);
    const token = decodeURIComponent(/accept-invite\?token=(\S+)/.exec(mail!.text)![1]!);
    const accepted = await api(mesh, 'POST', '/v1/org/invites/accept', {
      body: { token, password: TEST_PASSWORD },
    });
    expect(accepted.status).toBe(201);
    const login = await api(mesh, 'POST', '/v1/auth/token', { body: { email, password: TEST_PASSWORD } });
    return {
      email,
      token: login.body['access_token'] as string,
      userId: accepted.body['user_id'] as string,
      orgId: inviter.orgId,
    };
  }

  /** Registers an agent of `creator`'s org; `token()` exchanges its key for a fresh JWT. */
  async function agent(fields: Record<string, unknown> = {}, creator: User = owner) {
    const created = await api(mesh, 'POST', '/v1/agents', {
      token: creator.token,
      body: { name: `bot-${randomBytes(3).toString('hex')}`, ...fields },
    });
    expect(created.status).toBe(201);
    const id = (created.body['agent'] as { id: string }).id;
    const apiKey = created.body['api_key'] as string;
    const token = async () => {
      const t = await api(mesh, 'POST', '/v1/auth/agent-token', { body: { agent_id: id, api_key: apiKey } });
      expect(t.status).toBe(200);
      return t.body['access_token'] as string;
    };
    return { id, token };
  }

  async function vault(name: string, token = owner.token): Promise<string> {
    const r = await api(mesh, 'POST', '/v1/vaults', {
      token,
      body: { name: `${name}-${randomBytes(3).toString('hex')}` },
    });
    expect(r.status).toBe(201);
    return r.body['id'] as string;
  }

  async function putSecret(vaultId: string, path: string, value: string, token = owner.token) {
    const r = await api(mesh, 'PUT', `/v1/vaults/${vaultId}/secrets/${path}`, { token, body: { value } });
    expect(r.status).toBe(201);
  }

  const createPolicy = (vaultId: string, body: unknown, token = owner.token) =>
    api(mesh, 'POST', `/v1/vaults/${vaultId}/policies`, { token, body });
  const listPolicies = (vaultId: string, token = owner.token) =>
    api(mesh, 'GET', `/v1/vaults/${vaultId}/policies`, { token });
  const updatePolicy = (vaultId: string, policyId: string, body: unknown, token = owner.token) =>
    api(mesh, 'PUT', `/v1/vaults/${vaultId}/policies/${policyId}`, { token, body });
  const deletePolicy = (vaultId: string, policyId: string, token = owner.token) =>
    api(mesh, 'DELETE', `/v1/vaults/${vaultId}/policies/${policyId}`, { token });

  /** Creates a grant and returns its id. */
  async function grant(vaultId: string, body: Record<string, unknown>): Promise<string> {
    const r = await createPolicy(vaultId, body);
    expect({ status: r.status, body: r.body }).toMatchObject({ status: 201 });
    return r.body['id'] as string;
  }

  /** Reads a secret as `token`, optionally from a client address (through the trusted proxy). */
  async function read(vaultId: string, path: string, token: string, clientIp?: string): Promise<Reply> {
    const res = await fetch(`${mesh.baseUrl}/v1/vaults/${vaultId}/secrets/${path}`, {
      headers: { authorization: `Bearer ${token}`, ...(clientIp ? { 'x-forwarded-for': clientIp } : {}) },
    });
    const text = await res.text();
    return {
      status: res.status,
      body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
      headers: res.headers,
    };
  }

  const outboxOf = (policyId: string) =>
    sqlOn<{ name: string; org_id: string; payload: Record<string, unknown>; published_at: Date | null }>(
      mesh,
      `SELECT name, org_id, payload, published_at FROM policy.outbox WHERE payload->>'policy_id' = $1 ORDER BY seq`,
      [policyId],
    );

  describe('managing grants', () => {
    it('creates, lists, updates and deletes a grant in the reference shape', async () => {
      const v = await vault('crud');
      const bot = await agent();
      const created = await createPolicy(v, {
        secret_path_pattern: 'prod/**',
        principal_type: 'agent',
        principal_id: bot.id,
        permissions: ['read'],
      });
      expect(created.status).toBe(201);
      expect(created.body).toEqual({
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        vault_id: v,
        secret_path_pattern: 'prod/**',
        principal_type: 'agent',
        principal_id: bot.id,
        permissions: ['read'],
        conditions: {},
        effect: 'allow',
        priority: 0,
        expires_at: null,
        consensus_trigger: null,
        created_by: owner.userId,
        created_by_type: 'user',
        created_at: expect.any(String),
        updated_at: expect.any(String),
      });
      const id = created.body['id'] as string;

      const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
      const second = await createPolicy(v, {
        secret_path_pattern: 'prod/db',
        principal_type: 'user',
        principal_id: owner.userId,
        permissions: ['write', 'read'],
        effect: 'deny',
        priority: 7,
        expires_at: expiresAt,
        conditions: {
          ip_cidrs: ['10.0.0.0/8', '2001:db8::/32'],
          time_window: { start: '00:00', end: '23:59' },
        },
      });
      expect(second.status).toBe(201);
      expect(second.body).toMatchObject({
        permissions: ['read', 'write'],
        effect: 'deny',
        priority: 7,
        expires_at: expiresAt,
        conditions: {
          ip_cidrs: ['10.0.0.0/8', '2001:db8::/32'],
          time_window: { start: '00:00', end: '23:59' },
        },
      });

      const list = await listPolicies(v);
      expect(list.status).toBe(200);
      expect((list.body['policies'] as Array<{ id: string }>).map((p) => p.id)).toEqual([
        id,
        second.body['id'],
      ]);

      const updated = await updatePolicy(v, id, { permissions: ['read', 'write'], priority: 3 });
      expect(updated.status).toBe(200);
      expect(updated.body).toMatchObject({
        id,
        secret_path_pattern: 'prod/**',
        permissions: ['read', 'write'],
        priority: 3,
        effect: 'allow',
        created_at: created.body['created_at'],
      });
      expect(Date.parse(updated.body['updated_at'] as string)).toBeGreaterThanOrEqual(
        Date.parse(created.body['updated_at'] as string),
      );
      const cleared = await updatePolicy(v, second.body['id'] as string, {
        expires_at: null,
        conditions: null,
      });
      expect(cleared.body).toMatchObject({ expires_at: null, conditions: {} });

      const [row] = await sqlOn<Record<string, unknown>>(mesh, `SELECT * FROM policy.grants WHERE id = $1`, [
        id,
      ]);
      expect(row).toMatchObject({
        org_id: owner.orgId,
        vault_id: v,
        principal_type: 'agent',
        principal_id: bot.id,
        permissions: ['read', 'write'],
        priority: 3,
        created_by: owner.userId,
      });

      expect((await deletePolicy(v, id)).status).toBe(204);
      expectProblem(await deletePolicy(v, id), 404);
      expectProblem(await updatePolicy(v, id, { priority: 1 }), 404);
      expect((await listPolicies(v)).body['policies']).toEqual([
        expect.objectContaining({ id: second.body['id'] }),
      ]);
    });

    it('writes policy.created, policy.updated and policy.deleted to the outbox and publishes them', async () => {
      const v = await vault('events');
      const m = await member('member');
      const id = await grant(v, {
        secret_path_pattern: 'app/*',
        principal_type: 'user',
        principal_id: m.userId,
        permissions: ['read'],
      });
      await updatePolicy(v, id, { priority: 2 });
      await deletePolicy(v, id);
      let rows = await outboxOf(id);
      expect(rows.map((r) => r.name)).toEqual(['policy.created', 'policy.updated', 'policy.deleted']);
      for (const r of rows) {
        expect(r.org_id).toBe(owner.orgId);
        expect(r.payload).toMatchObject({
          policy_id: id,
          vault_id: v,
          principal_type: 'user',
          principal_id: m.userId,
          secret_path_pattern: 'app/*',
          actor_id: owner.userId,
        });
      }
      expect(rows[1]!.payload).toMatchObject({ changed: ['priority'], priority: 2 });
      // The relay marks a row once JetStream has acknowledged it.
      for (let i = 0; i < 50 && rows.some((r) => r.published_at === null); i += 1) {
        await new Promise((r) => setTimeout(r, 100));
        rows = await outboxOf(id);
      }
      expect(rows.every((r) => r.published_at !== null)).toBe(true);
    });

    it('refuses bad fields with 400 naming the field, storing nothing', async () => {
      const v = await vault('bad');
      const bot = await agent();
      const base = {
        secret_path_pattern: 'prod/*',
        principal_type: 'agent',
        principal_id: bot.id,
        permissions: ['read'],
      };
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ secret_path_pattern: undefined }, 'secret_path_pattern'],
        [{ secret_path_pattern: '' }, 'secret_path_pattern'],
        [{ secret_path_pattern: '/prod' }, 'secret_path_pattern'],
        [{ secret_path_pattern: 'prod//db' }, 'secret_path_pattern'],
        [{ secret_path_pattern: 'db-*' }, 'secret_path_pattern'],
        [{ secret_path_pattern: 'a.b' }, 'secret_path_pattern'],
        [{ principal_type: 'group' }, 'principal_type'],
        [{ principal_type: undefined }, 'principal_type'],
        [{ principal_id: 'not-a-uuid' }, 'principal_id'],
        [{ principal_id: UNKNOWN_ID }, 'principal_id'],
        [{ principal_type: 'user', principal_id: bot.id }, 'principal_id'],
        [{ permissions: [] }, 'permissions'],
        [{ permissions: ['read', 'admin'] }, 'permissions'],
        [{ permissions: 'read' }, 'permissions'],
        [{ effect: 'maybe' }, 'effect'],
        [{ priority: -1 }, 'priority'],
        [{ priority: 2.5 }, 'priority'],
        [{ priority: '1' }, 'priority'],
        [{ expires_at: 'next week' }, 'expires_at'],
        [{ expires_at: '2001-01-01T00:00:00Z' }, 'expires_at'],
        [{ conditions: ['ip'] }, 'conditions'],
        [{ conditions: { geo: 'eu' } }, 'conditions.geo'],
        [{ conditions: { ip_cidrs: ['10.0.0.0/33'] } }, 'conditions.ip_cidrs'],
        [{ conditions: { ip_cidrs: [] } }, 'conditions.ip_cidrs'],
        [{ conditions: { ip_cidrs: ['example.com'] } }, 'conditions.ip_cidrs'],
        [{ conditions: { time_window: { start: '9am', end: '17:00' } } }, 'conditions.time_window.start'],
        [{ conditions: { time_window: { start: '09:00', end: '25:00' } } }, 'conditions.time_window.end'],
        [
          { conditions: { time_window: { start: '09:00', end: '17:00', timezone: 'Nowhere/City' } } },
          'conditions.time_window.timezone',
        ],
        [
          { conditions: { time_window: { start: '09:00', end: '17:00', days: ['funday'] } } },
          'conditions.time_window.days',
        ],
        [{ conditions: { environment_in: 'production' } }, 'conditions.environment_in'],
        [{ conditions: { environment_in: [] } }, 'conditions.environment_in'],
        [{ tx_conditions: {} }, 'tx_conditions'],
      ];
      for (const [patch, field] of cases) {
        const r = await createPolicy(v, { ...base, ...patch });
        expect({ patch, status: r.status, field: r.body['field'] }).toEqual({ patch, status: 400, field });
        expectProblem(r, 400, { field });
      }
      const m = await member('member');
      expectProblem(
        await createPolicy(v, {
          ...base,
          principal_type: 'user',
          principal_id: m.userId,
          conditions: { environment_in: ['production'] },
        }),
        400,
        { field: 'conditions.environment_in' },
      );
      // An agent of another org is not a principal of this vault's org.
      const stranger = await quickUser(mesh);
      const foreign = await agent({}, stranger);
      expectProblem(await createPolicy(v, { ...base, principal_id: foreign.id }), 400, {
        field: 'principal_id',
      });
      expectProblem(
        await createPolicy(v, { ...base, principal_type: 'user', principal_id: stranger.userId }),
        400,
        {
          field: 'principal_id',
        },
      );
      expect((await listPolicies(v)).body).toEqual({ policies: [] });

      const id = await grant(v, base);
      for (const [patch, field] of [
        [{ principal_id: UNKNOWN_ID }, 'principal_id'],
        [{ principal_type: 'user' }, 'principal_type'],
        [{ permissions: ['execute'] }, 'permissions'],
        [{ priority: 'high' }, 'priority'],
        [{ expires_at: '2001-01-01T00:00:00Z' }, 'expires_at'],
        [{ conditions: { ip_cidrs: ['300.1.1.1/8'] } }, 'conditions.ip_cidrs'],
      ] as Array<[Record<string, unknown>, string]>) {
        expectProblem(await updatePolicy(v, id, patch), 400, { field });
      }
      expect((await listPolicies(v)).body['policies']).toEqual([
        expect.objectContaining({ id, permissions: ['read'], priority: 0, conditions: {} }),
      ]);
    });

    it('refuses agents (403) and members who neither admin the org nor created the vault (403)', async () => {
      const v = await vault('guarded');
      const m = await member('member');
      const bot = await agent();
      const body = {
        secret_path_pattern: '**',
        principal_type: 'user',
        principal_id: m.userId,
        permissions: ['read'],
      };
      const id = await grant(v, body);
      const agentToken = await bot.token();
      for (const token of [agentToken, m.token]) {
        expectProblem(await createPolicy(v, body, token), 403);
        expectProblem(await listPolicies(v, token), 403);
        expectProblem(await updatePolicy(v, id, { priority: 9 }, token), 403);
        expectProblem(await deletePolicy(v, id, token), 403);
      }
      expect((await listPolicies(v)).body['policies']).toEqual([
        expect.objectContaining({ id, priority: 0 }),
      ]);
      expectProblem(await api(mesh, 'GET', `/v1/vaults/${v}/policies`), 401);

      // An admin of the org manages any vault's grants; a member manages those of the vault it created.
      const admin = await member('admin');
      expect((await updatePolicy(v, id, { priority: 1 }, admin.token)).status).toBe(200);
      const own = await vault('members-own', m.token);
      const r = await createPolicy(own, { ...body, principal_id: admin.userId }, m.token);
      expect(r.status).toBe(201);
      expect(r.body['created_by']).toBe(m.userId);
      expect((await listPolicies(own, m.token)).body['policies']).toHaveLength(1);
      expectProblem(await listPolicies(own, (await member('member')).token), 403);
    });

    it('answers 404 for another org’s vault, unknown vaults and unknown policies', async () => {
      const v = await vault('hidden');
      const m = await member('member');
      const body = {
        secret_path_pattern: '**',
        principal_type: 'user',
        principal_id: m.userId,
        permissions: ['read'],
      };
      const id = await grant(v, body);
      const stranger = await quickUser(mesh);
      expectProblem(await createPolicy(v, body, stranger.token), 404);
      expectProblem(await listPolicies(v, stranger.token), 404);
      expectProblem(await updatePolicy(v, id, { priority: 5 }, stranger.token), 404);
      expectProblem(await deletePolicy(v, id, stranger.token), 404);
      expectProblem(await listPolicies(UNKNOWN_ID), 404);
      expectProblem(await listPolicies('not-a-uuid'), 404);
      expectProblem(await updatePolicy(v, UNKNOWN_ID, { priority: 1 }), 404);
      expectProblem(await deletePolicy(v, 'not-a-uuid'), 404);
      // A policy id is only found through its own vault.
      const other = await vault('other');
      expectProblem(await updatePolicy(other, id, { priority: 1 }), 404);
      expectProblem(await deletePolicy(other, id), 404);
      expect((await listPolicies(v)).body['policies']).toEqual([
        expect.objectContaining({ id, priority: 0 }),
      ]);
    });

    it('answers 403 on the system vaults, to the org owner too', async () => {
      await api(mesh, 'GET', '/v1/vaults', { token: owner.token });
      const rows = await sqlOn<{ id: string }>(
        mesh,
        `SELECT id FROM vault_crypto.vaults WHERE org_id = $1 AND is_system`,
        [owner.orgId],
      );
      expect(rows).toHaveLength(2);
      for (const { id } of rows) {
        expectProblem(
          await createPolicy(id, {
            secret_path_pattern: '**',
            principal_type: 'user',
            principal_id: owner.userId,
            permissions: ['read'],
          }),
          403,
        );
        expectProblem(await listPolicies(id), 403);
        expectProblem(await deletePolicy(id, UNKNOWN_ID), 403);
      }
    });
  });

  describe('decisions', () => {
    it('lets an agent read with a grant, and denies it without one or beyond it', async () => {
      const v = await vault('agent-reads');
      await putSecret(v, 'prod/db', 'db-pass');
      await putSecret(v, 'dev/db', 'dev-pass');
      const bot = await agent();
      const none = await bot.token();
      expect([403, 404]).toContain((await read(v, 'prod/db', none)).status);

      const id = await grant(v, {
        secret_path_pattern: 'prod/*',
        principal_type: 'agent',
        principal_id: bot.id,
        permissions: ['read'],
      });
      const token = await bot.token();
      expect((await read(v, 'prod/db', token)).body).toMatchObject({ value: 'db-pass' });
      expectProblem(await read(v, 'dev/db', token), 403);
      expectProblem(
        await api(mesh, 'PUT', `/v1/vaults/${v}/secrets/prod/db`, { token, body: { value: 'agent-write' } }),
        403,
      );
      await deletePolicy(v, id);
      expectProblem(await read(v, 'prod/db', token), 403);
    });

    it('lets deny beat allow at equal priority, and a higher-priority allow beat a lower deny', async () => {
      const v = await vault('precedence');
      await putSecret(v, 'app/key', 'k');
      const m = await member('member');
      const base = { principal_type: 'user', principal_id: m.userId, permissions: ['read'] };
      await grant(v, { ...base, secret_path_pattern: 'app/*', priority: 5 });
      expect((await read(v, 'app/key', m.token)).body).toMatchObject({ value: 'k' });
      const deny = await grant(v, { ...base, secret_path_pattern: '**', priority: 5, effect: 'deny' });
      expectProblem(await read(v, 'app/key', m.token), 403);
      await updatePolicy(v, deny, { priority: 4 });
      expect((await read(v, 'app/key', m.token)).body).toMatchObject({ value: 'k' });
      await updatePolicy(v, deny, { priority: 6 });
      expectProblem(await read(v, 'app/key', m.token), 403);

      // The same rules for an agent.
      const bot = await agent();
      const agentBase = { principal_type: 'agent', principal_id: bot.id, permissions: ['read'] };
      await grant(v, { ...agentBase, secret_path_pattern: 'app/*', priority: 1 });
      const agentDeny = await grant(v, {
        ...agentBase,
        secret_path_pattern: 'app/key',
        priority: 1,
        effect: 'deny',
      });
      const token = await bot.token();
      expectProblem(await read(v, 'app/key', token), 403);
      await grant(v, { ...agentBase, secret_path_pattern: 'app/key', priority: 2 });
      expect((await read(v, 'app/key', token)).body).toMatchObject({ value: 'k' });
      await updatePolicy(v, agentDeny, { priority: 2 });
      expectProblem(await read(v, 'app/key', token), 403);
    });

    it('stops applying a grant once it expires', async () => {
      const v = await vault('expiry');
      await putSecret(v, 'tmp/key', 'short');
      const m = await member('member');
      await grant(v, {
        secret_path_pattern: 'tmp/*',
        principal_type: 'user',
        principal_id: m.userId,
        permissions: ['read'],
        expires_at: new Date(Date.now() + 2000).toISOString(),
      });
      expect((await read(v, 'tmp/key', m.token)).body).toMatchObject({ value: 'short' });
      await new Promise((r) => setTimeout(r, 2500));
      expectProblem(await read(v, 'tmp/key', m.token), 403);
      // Still listed, with its expiry.
      expect((await listPolicies(v)).body['policies']).toEqual([
        expect.objectContaining({ expires_at: expect.any(String) }),
      ]);
    });

    it('applies ip_cidrs to the client address the gateway resolved', async () => {
      const v = await vault('by-ip');
      await putSecret(v, 'net/key', 'office-only');
      const m = await member('member');
      await grant(v, {
        secret_path_pattern: 'net/*',
        principal_type: 'user',
        principal_id: m.userId,
        permissions: ['read'],
        conditions: { ip_cidrs: ['203.0.113.0/24', '2001:db8::/32'] },
      });
      expect((await read(v, 'net/key', m.token, '203.0.113.9')).body).toMatchObject({ value: 'office-only' });
      expect((await read(v, 'net/key', m.token, '2001:db8::7')).status).toBe(200);
      expectProblem(await read(v, 'net/key', m.token, '198.51.100.4'), 403);
      expectProblem(await read(v, 'net/key', m.token), 403);
    });

    it('applies environment_in to the agent’s environment', async () => {
      const v = await vault('by-env');
      await putSecret(v, 'env/key', 'prod-only');
      const prod = await agent({ environment: 'production' });
      const preview = await agent({ environment: 'preview' });
      for (const a of [prod, preview]) {
        await grant(v, {
          secret_path_pattern: 'env/*',
          principal_type: 'agent',
          principal_id: a.id,
          permissions: ['read'],
          conditions: { environment_in: ['production'] },
        });
      }
      expect((await read(v, 'env/key', await prod.token())).body).toMatchObject({ value: 'prod-only' });
      expectProblem(await read(v, 'env/key', await preview.token()), 403);
    });

    it('applies a time window', async () => {
      const v = await vault('by-time');
      await putSecret(v, 'tw/key', 'in-hours');
      const m = await member('member');
      const hhmm = (d: Date) => d.toISOString().slice(11, 16);
      const now = Date.now();
      const open = await grant(v, {
        secret_path_pattern: 'tw/*',
        principal_type: 'user',
        principal_id: m.userId,
        permissions: ['read'],
        conditions: {
          time_window: { start: hhmm(new Date(now - 3_600_000)), end: hhmm(new Date(now + 3_600_000)) },
        },
      });
      expect((await read(v, 'tw/key', m.token)).body).toMatchObject({ value: 'in-hours' });
      await updatePolicy(v, open, {
        conditions: {
          time_window: { start: hhmm(new Date(now + 3_600_000)), end: hhmm(new Date(now + 7_200_000)) },
        },
      });
      expectProblem(await read(v, 'tw/key', m.token), 403);
    });
  });
});
