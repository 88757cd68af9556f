import { api, expectProblem, quickUser } from '../src/api';
import { sharedMesh, type Mesh } from '../src/mesh';

type User = Awaited<ReturnType<typeof quickUser>>;
type Doc = { paths: Record<string, Record<string, Record<string, unknown>>> };

// Issue 12 for vaults, secrets, shares, policies and IP rules: the gateway owns the HTTP shape
// (aliases, nulls that clear, unknown and unchangeable fields), and the document describes it.
describe('vault, share, policy and IP rule contracts at the gateway', () => {
  let mesh: Mesh;
  let owner: User;
  let vaultId: string;

  beforeAll(async () => {
    mesh = await sharedMesh();
    owner = await quickUser(mesh);
    const v = await api(mesh, 'POST', '/v1/vaults', { token: owner.token, body: { name: 'contracts' } });
    expect(v.status).toBe(201);
    vaultId = v.body['id'] as string;
  });

  const put = (path: string, body: Record<string, unknown>) =>
    api(mesh, 'PUT', `/v1/vaults/${vaultId}/secrets/${path}`, { token: owner.token, body });
  const get = (path: string) =>
    api(mesh, 'GET', `/v1/vaults/${vaultId}/secrets/${path}`, { token: owner.token });

  it('takes secret_type as the reference CLI sends it, and refuses it when it contradicts type', async () => {
    expect((await put('cli/key', { secret_type: 'api_key', value: 'k1' })).body).toMatchObject({
      type: 'api_key',
      version: 1,
    });
    expect(
      (await put('cli/key', { type: 'password', secret_type: 'password', value: 'k2' })).body,
    ).toMatchObject({
      type: 'password',
      version: 2,
    });
    const clash = await put('cli/key', { type: 'note', secret_type: 'api_key', value: 'k3' });
    expectProblem(clash, 400, { field: 'secret_type' });
    expect(String(clash.body['detail'])).toContain('secret_type');
    expectProblem(await put('cli/key', { secret_type: 'blob', value: 'k3' }), 400, { field: 'secret_type' });
    expect((await get('cli/key')).body).toMatchObject({ version: 2, type: 'password', value: 'k2' });
  });

  it('stores a value holding NUL as it was sent, and refuses NUL anywhere else', async () => {
    expect((await put('bin/nul', { value: 'a\u0000b' })).status).toBe(201);
    expect((await get('bin/nul')).body).toMatchObject({ value: 'a\u0000b', value_encoding: 'utf8' });
    expectProblem(await put('bin/nul', { value: 'x', metadata: { k: 'a\u0000' } }), 400, {
      field: 'metadata.k',
    });
    expect((await get('bin/nul')).body).toMatchObject({ version: 1 });
  });

  it('clears a policy field sent as null back to its default, and refuses a change of principal', async () => {
    const created = await api(mesh, 'POST', `/v1/vaults/${vaultId}/policies`, {
      token: owner.token,
      body: {
        secret_path_pattern: 'cli/*',
        principal_type: 'user',
        principal_id: owner.userId,
        permissions: ['read'],
        effect: 'deny',
        priority: 5,
        expires_at: new Date(Date.now() + 3_600_000).toISOString(),
        conditions: { time_window: { start: '00:00', end: '23:59', days: ['sun', 'mon'] } },
      },
    });
    expect(created.status).toBe(201);
    expect(created.body['conditions']).toEqual({
      time_window: { start: '00:00', end: '23:59', days: ['mon', 'sun'] },
    });
    const id = created.body['id'] as string;
    const path = `/v1/vaults/${vaultId}/policies/${id}`;
    const cleared = await api(mesh, 'PUT', path, {
      token: owner.token,
      body: { effect: null, priority: null, expires_at: null, conditions: null },
    });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toMatchObject({ effect: 'allow', priority: 0, expires_at: null, conditions: {} });
    const unchanged = await api(mesh, 'PUT', path, { token: owner.token, body: {} });
    expect(unchanged.body).toMatchObject({
      effect: 'allow',
      priority: 0,
      updated_at: cleared.body['updated_at'],
    });
    const moved = await api(mesh, 'PUT', path, { token: owner.token, body: { principal_id: owner.userId } });
    expectProblem(moved, 400, { field: 'principal_id' });
    expect(String(moved.body['detail'])).toMatch(/principal_id.*cannot be changed/);
    expectProblem(await api(mesh, 'PUT', path, { token: owner.token, body: { permissions: null } }), 400, {
      field: 'permissions',
    });
  });

  it('checks the body of a share and of an IP rule before any service sees it', async () => {
    const secretId = (await put('share/me', { value: 'v' })).body['id'] as string;
    const bad = await api(mesh, 'POST', `/v1/secrets/${secretId}/share`, {
      token: owner.token,
      body: {
        recipient_type: 'anyone_with_link',
        expires_at: new Date(Date.now() + 60_000).toISOString(),
        email: 'a@b.co',
      },
    });
    expectProblem(bad, 400, { field: 'email' });
    const rule = await api(mesh, 'POST', '/v1/security/ip-rules', {
      token: owner.token,
      body: { cidr: '203.0.113.0/24', rule_type: 'block', description: null },
    });
    expect(rule.body).toMatchObject({ cidr: '203.0.113.0/24', rule_type: 'block', description: '' });
  });

  it('documents every route of these groups with its request and response shapes', async () => {
    const r = await api(mesh, 'GET', '/v1/openapi.json');
    expect(r.status).toBe(200);
    const d = r.body as unknown as Doc;
    const ok = (path: string, method: string, status: string) =>
      (d.paths[path]?.[method]?.['responses'] as Record<string, unknown> | undefined)?.[status];
    const bodyOf = (path: string, method: string) =>
      JSON.stringify(d.paths[path]?.[method]?.['requestBody'] ?? null);

    expect(bodyOf('/v1/vaults/{vault_id}/secrets/{path}', 'put')).toContain('secret_type');
    expect(JSON.stringify(ok('/v1/vaults/{vault_id}/secrets/{path}', 'get', '200'))).toContain(
      'value_encoding',
    );
    expect(bodyOf('/v1/vaults/{vault_id}/policies', 'post')).toContain('time_window');
    expect(JSON.stringify(ok('/v1/vaults/{vault_id}/policies', 'get', '200'))).toContain('updated_at');
    expect(bodyOf('/v1/secrets/{secret_id}/share', 'post')).toContain('ip_allowlist');
    expect(JSON.stringify(ok('/v1/share/{share_id}', 'get', '200'))).toContain('share_id');
    expect(d.paths['/v1/share/{share_id}']?.['get']?.['security']).toEqual([]);
    expect(bodyOf('/v1/security/ip-rules', 'post')).toContain('rule_type');
    for (const [path, method, status] of [
      ['/v1/vaults', 'post', '201'],
      ['/v1/vaults/{vault_id}/secret-versions/{path}', 'get', '200'],
      ['/v1/vaults/{vault_id}/secret-version/{rest}', 'get', '200'],
      ['/v1/vaults/{vault_id}/env-vars/resolve', 'get', '200'],
      ['/v1/org/encryption-key/rotate', 'post', '200'],
      ['/v1/shares/outbound', 'get', '200'],
      ['/v1/vaults/{vault_id}/policies/{policy_id}', 'put', '200'],
      ['/v1/security/ip-rules', 'get', '200'],
    ] as const) {
      expect({ path, method, documented: JSON.stringify(ok(path, method, status) ?? null) }).toEqual({
        path,
        method,
        documented: expect.stringContaining('application/json'),
      });
    }
  });
});
