import { randomBytes } from 'node:crypto';
import { type SmtpCapture } from '@custos/testing';
import { TEST_PASSWORD, api, expectProblem, quickUser } from '../src/api';
import { sqlOn } from '../src/db';
import { sharedMail, sharedMesh, type Mesh } from '../src/mesh';

type User = Awaited<ReturnType<typeof quickUser>>;

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';

describe('vaults, system vaults, and who may touch secrets (owner, admin, member, agent)', () => {
  let mesh: Mesh;
  let smtp: SmtpCapture;
  let owner: User;

  beforeAll(async () => {
    mesh = await sharedMesh();
    smtp = sharedMail();
    owner = await quickUser(mesh);
  });
  afterAll(async () => {
    await mesh?.stop();
    await smtp?.close();
  });

  /** Invites a new address into the owner's org with a role and signs it in. */
  async function member(role: 'member' | 'admin'): Promise<User> {
    const email = `m-${randomBytes(4).toString('hex')}@example.com`;
    const r = await api(mesh, 'POST', '/v1/org/invite', { token: owner.token, body: { email, role } });
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
      orgId: owner.orgId,
    };
  }

  /** Registers an agent of the owner's org and returns a fresh token for it. */
  async function agent(fields: Record<string, unknown> = {}) {
    const created = await api(mesh, 'POST', '/v1/agents', {
      token: owner.token,
      body: { name: 'bot', ...fields },
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
    const r = await api(mesh, 'POST', '/v1/vaults', { token, body: { name, description: `${name} vault` } });
    expect(r.status).toBe(201);
    return r.body['id'] as string;
  }

  it('creates, lists, reads and deletes vaults with the reference shape', async () => {
    const r = await api(mesh, 'POST', '/v1/vaults', {
      token: owner.token,
      body: { name: '  payments  ', description: 'PSP keys' },
    });
    expect(r.status).toBe(201);
    expect(r.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: 'payments',
      description: 'PSP keys',
      created_by: owner.userId,
      created_by_type: 'user',
      created_at: expect.any(String),
    });
    const id = r.body['id'] as string;
    const list = await api(mesh, 'GET', '/v1/vaults', { token: owner.token });
    expect(list.status).toBe(200);
    const names = (list.body['vaults'] as Array<{ name: string }>).map((v) => v.name);
    expect(names).toContain('payments');
    expect(names.some((n) => n.startsWith('__'))).toBe(false);
    expect((await api(mesh, 'GET', `/v1/vaults/${id}`, { token: owner.token })).body).toMatchObject({
      id,
      name: 'payments',
    });
    expect((await api(mesh, 'DELETE', `/v1/vaults/${id}`, { token: owner.token })).status).toBe(204);
    expectProblem(await api(mesh, 'GET', `/v1/vaults/${id}`, { token: owner.token }), 404);
    expectProblem(await api(mesh, 'DELETE', `/v1/vaults/${id}`, { token: owner.token }), 404);
  });

  it('keeps names unique per org after trimming (409) and refuses empty, long, reserved or non-string names', async () => {
    await vault('dup');
    expectProblem(
      await api(mesh, 'POST', '/v1/vaults', { token: owner.token, body: { name: ' dup ' } }),
      409,
      { field: 'name' },
    );
    const other = await quickUser(mesh);
    expect(
      (await api(mesh, 'POST', '/v1/vaults', { token: other.token, body: { name: 'dup' } })).status,
    ).toBe(201);
    for (const name of ['', '   ', 'x'.repeat(256), '__agent-keys', '__mine']) {
      expectProblem(await api(mesh, 'POST', '/v1/vaults', { token: owner.token, body: { name } }), 400, {
        field: 'name',
      });
    }
    expectProblem(await api(mesh, 'POST', '/v1/vaults', { token: owner.token, body: { name: 7 } }), 400, {
      field: 'name',
    });
    expectProblem(await api(mesh, 'POST', '/v1/vaults', { token: owner.token, body: {} }), 400, {
      field: 'name',
    });
    expect(
      (await api(mesh, 'POST', '/v1/vaults', { token: owner.token, body: { name: 'y'.repeat(255) } })).status,
    ).toBe(201);
  });

  it('hides another org’s vault (404) and answers 404 for ids that are not vaults', async () => {
    const id = await vault('private');
    const stranger = await quickUser(mesh);
    expectProblem(await api(mesh, 'GET', `/v1/vaults/${id}`, { token: stranger.token }), 404);
    expectProblem(await api(mesh, 'DELETE', `/v1/vaults/${id}`, { token: stranger.token }), 404);
    expectProblem(await api(mesh, 'GET', `/v1/vaults/${UNKNOWN_ID}`, { token: owner.token }), 404);
    expectProblem(await api(mesh, 'GET', `/v1/vaults/123`, { token: owner.token }), 404);
    expect((await api(mesh, 'GET', `/v1/vaults/${id}`, { token: owner.token })).status).toBe(200);
  });

  it('answers 403 on the system vaults to everyone, the org owner included', async () => {
    await api(mesh, 'GET', '/v1/vaults', { token: owner.token });
    const rows = await sqlOn<{ id: string; name: string }>(
      mesh,
      `SELECT id, name FROM vault_crypto.vaults WHERE org_id = $1 AND is_system ORDER BY name`,
      [owner.orgId],
    );
    expect(rows.map((r) => r.name)).toEqual(['__agent-keys', '__treasury-keys']);
    const bot = await (await agent()).token();
    for (const { id } of rows) {
      // An agent is told 403 as well (not 404): the vault exists and is off limits to everyone.
      expectProblem(await api(mesh, 'GET', `/v1/vaults/${id}/secrets/k`, { token: bot }), 403);
      expectProblem(await api(mesh, 'GET', `/v1/vaults/${id}`, { token: owner.token }), 403);
      expectProblem(await api(mesh, 'DELETE', `/v1/vaults/${id}`, { token: owner.token }), 403);
      expectProblem(await api(mesh, 'GET', `/v1/vaults/${id}/secrets`, { token: owner.token }), 403);
      expectProblem(await api(mesh, 'GET', `/v1/vaults/${id}/secrets/k`, { token: owner.token }), 403);
      expectProblem(
        await api(mesh, 'PUT', `/v1/vaults/${id}/secrets/k`, { token: owner.token, body: { value: 'x' } }),
        403,
      );
      expectProblem(await api(mesh, 'DELETE', `/v1/vaults/${id}/secrets/k`, { token: owner.token }), 403);
    }
    const stored = await sqlOn(mesh, `SELECT 1 FROM vault_crypto.secret_versions WHERE vault_id = ANY($1)`, [
      rows.map((r) => r.id),
    ]);
    expect(stored).toEqual([]);
  });

  it('lets an admin manage any vault, while a member needs a policy and may not delete another’s vault', async () => {
    const id = await vault('team');
    await api(mesh, 'PUT', `/v1/vaults/${id}/secrets/app/key`, { token: owner.token, body: { value: 'k1' } });
    const admin = await member('admin');
    expect(
      (await api(mesh, 'GET', `/v1/vaults/${id}/secrets/app/key`, { token: admin.token })).body,
    ).toMatchObject({ value: 'k1' });
    const m = await member('member');
    expect((await api(mesh, 'GET', `/v1/vaults/${id}`, { token: m.token })).status).toBe(200);
    expectProblem(await api(mesh, 'GET', `/v1/vaults/${id}/secrets/app/key`, { token: m.token }), 403);
    expectProblem(
      await api(mesh, 'PUT', `/v1/vaults/${id}/secrets/app/key`, { token: m.token, body: { value: 'mine' } }),
      403,
    );
    expectProblem(await api(mesh, 'DELETE', `/v1/vaults/${id}`, { token: m.token }), 403);
    expect((await api(mesh, 'GET', `/v1/vaults/${id}/secrets`, { token: m.token })).body).toEqual({
      secrets: [],
    });

    const grant = await api(mesh, 'POST', `/v1/vaults/${id}/policies`, {
      token: owner.token,
      body: {
        secret_path_pattern: 'app/*',
        principal_type: 'user',
        principal_id: m.userId,
        permissions: ['read'],
      },
    });
    expect(grant.status).toBe(201);
    expect(
      (await api(mesh, 'GET', `/v1/vaults/${id}/secrets/app/key`, { token: m.token })).body,
    ).toMatchObject({ value: 'k1' });
    expectProblem(
      await api(mesh, 'PUT', `/v1/vaults/${id}/secrets/app/key`, { token: m.token, body: { value: 'mine' } }),
      403,
    );
    await api(mesh, 'PUT', `/v1/vaults/${id}/secrets/ops/other`, {
      token: owner.token,
      body: { value: 'o' },
    });
    expectProblem(await api(mesh, 'GET', `/v1/vaults/${id}/secrets/ops/other`, { token: m.token }), 403);
    const listed = await api(mesh, 'GET', `/v1/vaults/${id}/secrets`, { token: m.token });
    expect((listed.body['secrets'] as Array<{ path: string }>).map((s) => s.path)).toEqual(['app/key']);
    // A member's own vault is theirs to manage.
    const own = await vault('mine', m.token);
    expect(
      (await api(mesh, 'PUT', `/v1/vaults/${own}/secrets/x`, { token: m.token, body: { value: 'x' } }))
        .status,
    ).toBe(201);
    expect((await api(mesh, 'DELETE', `/v1/vaults/${own}`, { token: m.token })).status).toBe(204);
  });

  it('gives an agent exactly what its policies and token scopes allow', async () => {
    const id = await vault('agent-vault');
    for (const [path, type] of [
      ['prod/db', 'password'],
      ['prod/deep/key', 'api_key'],
      ['prod/signer', 'private_key'],
      ['dev/db', 'password'],
    ]) {
      await api(mesh, 'PUT', `/v1/vaults/${id}/secrets/${path}`, {
        token: owner.token,
        body: { type, value: `v-${path}` },
      });
    }
    const bot = await agent();
    // No policy yet: no scopes, no vaults, no access, and the vault is hidden from it.
    const before = await bot.token();
    expectProblem(await api(mesh, 'GET', `/v1/vaults/${id}/secrets/prod/db`, { token: before }), 404);
    expect((await api(mesh, 'GET', '/v1/vaults', { token: before })).body).toEqual({ vaults: [] });

    const grant = await api(mesh, 'POST', `/v1/vaults/${id}/policies`, {
      token: owner.token,
      body: {
        secret_path_pattern: 'prod/*',
        principal_type: 'agent',
        principal_id: bot.id,
        permissions: ['read'],
      },
    });
    expect(grant.status).toBe(201);
    const token = await bot.token();
    expect((await api(mesh, 'GET', `/v1/vaults/${id}/secrets/prod/db`, { token })).body).toMatchObject({
      value: 'v-prod/db',
    });
    expect((await api(mesh, 'GET', `/v1/vaults/${id}/secrets/prod/signer`, { token })).body).toMatchObject({
      value: 'v-prod/signer',
    });
    expectProblem(await api(mesh, 'GET', `/v1/vaults/${id}/secrets/prod/deep/key`, { token }), 403);
    expectProblem(await api(mesh, 'GET', `/v1/vaults/${id}/secrets/dev/db`, { token }), 403);
    expectProblem(
      await api(mesh, 'PUT', `/v1/vaults/${id}/secrets/prod/db`, { token, body: { value: 'agent-write' } }),
      403,
    );
    expectProblem(await api(mesh, 'DELETE', `/v1/vaults/${id}/secrets/prod/db`, { token }), 403);
    expect(
      (await api(mesh, 'GET', `/v1/vaults/${id}/secrets/prod/db`, { token: owner.token })).body,
    ).toMatchObject({
      value: 'v-prod/db',
    });
    expect(
      ((await api(mesh, 'GET', '/v1/vaults', { token })).body['vaults'] as Array<{ id: string }>).map(
        (v) => v.id,
      ),
    ).toEqual([id]);
  });

  it('refuses private_key and ssh_key secrets to an agent whose token has intents_api_enabled', async () => {
    const id = await vault('intents');
    await api(mesh, 'PUT', `/v1/vaults/${id}/secrets/keys/eth`, {
      token: owner.token,
      body: { type: 'private_key', value: '0xabc' },
    });
    await api(mesh, 'PUT', `/v1/vaults/${id}/secrets/keys/ssh`, {
      token: owner.token,
      body: { type: 'ssh_key', value: 'ssh-ed25519 x' },
    });
    await api(mesh, 'PUT', `/v1/vaults/${id}/secrets/keys/api`, {
      token: owner.token,
      body: { type: 'api_key', value: 'sk' },
    });
    const bot = await agent({ intents_api_enabled: true });
    await api(mesh, 'POST', `/v1/vaults/${id}/policies`, {
      token: owner.token,
      body: {
        secret_path_pattern: 'keys/*',
        principal_type: 'agent',
        principal_id: bot.id,
        permissions: ['read'],
      },
    });
    const token = await bot.token();
    expectProblem(await api(mesh, 'GET', `/v1/vaults/${id}/secrets/keys/eth`, { token }), 403);
    expectProblem(await api(mesh, 'GET', `/v1/vaults/${id}/secrets/keys/ssh`, { token }), 403);
    expect((await api(mesh, 'GET', `/v1/vaults/${id}/secrets/keys/api`, { token })).body).toMatchObject({
      value: 'sk',
    });
  });

  it('resolves env bundles with the precedence org shared < vault < branch override', async () => {
    const shared = await vault('shared');
    const app = await vault('web');
    const bundle = (v: Record<string, string>) => ({ type: 'env_bundle', value: JSON.stringify(v) });
    await api(mesh, 'PUT', `/v1/vaults/${shared}/secrets/env/production`, {
      token: owner.token,
      body: bundle({ LOG_LEVEL: 'info', REGION: 'eu', API_URL: 'https://shared' }),
    });
    await api(mesh, 'PUT', `/v1/vaults/${app}/secrets/env/production`, {
      token: owner.token,
      body: bundle({ API_URL: 'https://vault', DB_URL: 'postgres://vault' }),
    });
    await api(mesh, 'PUT', `/v1/vaults/${app}/secrets/env/production/branch/feature/x`, {
      token: owner.token,
      body: bundle({ DB_URL: 'postgres://branch' }),
    });
    const r = await api(
      mesh,
      'GET',
      `/v1/vaults/${app}/env-vars/resolve?environment=production&git_branch=feature/x`,
      {
        token: owner.token,
      },
    );
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      vars: { LOG_LEVEL: 'info', REGION: 'eu', API_URL: 'https://vault', DB_URL: 'postgres://branch' },
      sources: { LOG_LEVEL: 'shared', REGION: 'shared', API_URL: 'vault', DB_URL: 'branch_override' },
      environment: 'production',
      git_branch: 'feature/x',
      resolved_at: expect.any(String),
    });
    const noBranch = await api(mesh, 'GET', `/v1/vaults/${app}/env-vars/resolve?environment=production`, {
      token: owner.token,
    });
    expect(noBranch.body).toMatchObject({ vars: { DB_URL: 'postgres://vault' }, git_branch: null });
    expectProblem(
      await api(
        mesh,
        'GET',
        `/v1/vaults/${app}/env-vars/resolve?environment=${encodeURIComponent('prod uction')}`,
        { token: owner.token },
      ),
      400,
      { field: 'environment' },
    );
    expectProblem(
      await api(mesh, 'GET', `/v1/vaults/${app}/env-vars/resolve?git_branch=..%2Fx`, { token: owner.token }),
      400,
      { field: 'git_branch' },
    );
  });

  it('lets only an org owner or admin rotate the org key, and never an agent', async () => {
    const m = await member('member');
    // Refused for the role and for being an agent, not as a failed step-up.
    const byMember = await api(mesh, 'POST', '/v1/org/encryption-key/rotate', {
      confirm: TEST_PASSWORD,
      token: m.token,
    });
    expectProblem(byMember, 403);
    expect(byMember.body['type']).not.toBe('step_up_required');
    const bot = await agent();
    const byAgent = await api(mesh, 'POST', '/v1/org/encryption-key/rotate', {
      confirm: TEST_PASSWORD,
      token: await bot.token(),
    });
    expectProblem(byAgent, 403);
    expect(byAgent.body['type']).not.toBe('step_up_required');
  });
});
