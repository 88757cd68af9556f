import { TEST_PASSWORD, api, expectProblem, quickUser } from '../src/api';
import { PLATFORM_ADMIN_EMAIL, sharedMesh, type Mesh } from '../src/mesh';

const ADMIN_EMAIL = PLATFORM_ADMIN_EMAIL;

// DECISIONS.md: the free plan allows 3 vaults, 50 secrets and 2 agents.
describe('tier caps on vaults, secrets and agents hold under parallel creates', () => {
  let mesh: Mesh;

  beforeAll(async () => {
    // BILLING_DEFAULT_PLAN=free; ADMIN_EMAIL is a platform admin.
    mesh = await sharedMesh('free-plan');
  });
  afterAll(() => mesh?.stop());

  it('20 parallel vault creates on a free org make exactly 3 vaults; the rest are 403 resource_limit_exceeded', async () => {
    const u = await quickUser(mesh);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        api(mesh, 'POST', '/v1/vaults', { token: u.token, body: { name: `v${i}` } }),
      ),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(3);
    const refused = results.filter((r) => r.status !== 201);
    expect(refused).toHaveLength(17);
    for (const r of refused) expectProblem(r, 403, { type: 'resource_limit_exceeded' });
    const list = await api(mesh, 'GET', '/v1/vaults', { token: u.token });
    expect(list.body['vaults']).toHaveLength(3);
    // Deleting one frees its slot.
    const first = (list.body['vaults'] as Array<{ id: string }>)[0]!.id;
    expect((await api(mesh, 'DELETE', `/v1/vaults/${first}`, { token: u.token })).status).toBe(204);
    expect((await api(mesh, 'POST', '/v1/vaults', { token: u.token, body: { name: 'again' } })).status).toBe(
      201,
    );
  });

  it('60 parallel writes of new paths store exactly 50 secrets; new versions of a stored path still work', async () => {
    const u = await quickUser(mesh);
    const a = await api(mesh, 'POST', '/v1/vaults', { token: u.token, body: { name: 'a' } });
    const b = await api(mesh, 'POST', '/v1/vaults', { token: u.token, body: { name: 'b' } });
    const vaults = [a.body['id'] as string, b.body['id'] as string];
    const results = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        api(mesh, 'PUT', `/v1/vaults/${vaults[i % 2]}/secrets/s/${i}`, {
          token: u.token,
          body: { value: `v${i}` },
        }),
      ),
    );
    const stored = results.map((r, i) => ({ r, i })).filter(({ r }) => r.status === 201);
    expect(stored).toHaveLength(50);
    for (const r of results.filter((x) => x.status !== 201))
      expectProblem(r, 403, { type: 'resource_limit_exceeded' });
    const { i } = stored[0]!;
    const next = await api(mesh, 'PUT', `/v1/vaults/${vaults[i % 2]}/secrets/s/${i}`, {
      token: u.token,
      body: { value: 'v2' },
    });
    expect(next.status).toBe(201);
    expect(next.body).toMatchObject({ version: 2 });
    expectProblem(
      await api(mesh, 'PUT', `/v1/vaults/${vaults[0]}/secrets/brand/new`, {
        token: u.token,
        body: { value: 'x' },
      }),
      403,
      { type: 'resource_limit_exceeded' },
    );
    expect(
      (await api(mesh, 'DELETE', `/v1/vaults/${vaults[i % 2]}/secrets/s/${i}`, { token: u.token })).status,
    ).toBe(204);
    expect(
      (
        await api(mesh, 'PUT', `/v1/vaults/${vaults[0]}/secrets/brand/new`, {
          token: u.token,
          body: { value: 'x' },
        })
      ).status,
    ).toBe(201);
  });

  it('12 parallel agent creates on a free org make exactly 2; reactivating one over the cap is refused too', async () => {
    const u = await quickUser(mesh);
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        api(mesh, 'POST', '/v1/agents', { token: u.token, body: { name: `agent-${i}` } }),
      ),
    );
    const created = results.filter((r) => r.status === 201);
    expect(created).toHaveLength(2);
    for (const r of results.filter((x) => x.status !== 201))
      expectProblem(r, 403, { type: 'resource_limit_exceeded' });
    const list = await api(mesh, 'GET', '/v1/agents', { token: u.token });
    expect(list.body['agents'] as unknown[]).toHaveLength(2);

    // Deactivating one frees its place; a new agent takes it; reactivating the old one is then over the cap.
    const first = (created[0]!.body['agent'] as { id: string }).id;
    expect((await api(mesh, 'DELETE', `/v1/agents/${first}`, { token: u.token })).status).toBe(204);
    expect((await api(mesh, 'POST', '/v1/agents', { token: u.token, body: { name: 'third' } })).status).toBe(
      201,
    );
    const again = await api(mesh, 'PATCH', `/v1/agents/${first}`, {
      confirm: TEST_PASSWORD,
      token: u.token,
      body: { is_active: true },
    });
    expectProblem(again, 403, { type: 'resource_limit_exceeded' });
    const still = await api(mesh, 'GET', `/v1/agents/${first}`, { token: u.token });
    expect(still.body['is_active']).toBe(false);
  });

  it('GET /v1/billing/limits shows the plan; a platform admin changes it and the new caps apply', async () => {
    const u = await quickUser(mesh);
    const limits = await api(mesh, 'GET', '/v1/billing/limits', { token: u.token });
    expect(limits.status).toBe(200);
    expect(limits.body).toEqual({
      plan: 'free',
      limits: { vaults: 3, secrets: 50, agents: 2, requests_per_month: 1000 },
    });

    // Only a platform admin may change a plan; a bad plan is a 400 naming the field.
    expectProblem(
      await api(mesh, 'PUT', `/v1/admin/orgs/${u.orgId}/plan`, { token: u.token, body: { plan: 'pro' } }),
      403,
    );
    const signup = await api(mesh, 'POST', '/v1/auth/signup', {
      body: { email: ADMIN_EMAIL, password: TEST_PASSWORD },
    });
    expect(signup.status).toBe(201);
    const admin = String(signup.body['access_token']);
    expectProblem(
      await api(mesh, 'PUT', `/v1/admin/orgs/${u.orgId}/plan`, { token: admin, body: { plan: 'gold' } }),
      400,
      { field: 'plan' },
    );
    expectProblem(
      await api(mesh, 'PUT', `/v1/admin/orgs/not-a-uuid/plan`, { token: admin, body: { plan: 'pro' } }),
      400,
      { field: 'org_id' },
    );
    const set = await api(mesh, 'PUT', `/v1/admin/orgs/${u.orgId}/plan`, {
      token: admin,
      body: { plan: 'enterprise' },
    });
    expect(set.status).toBe(200);
    expect(set.body).toEqual({
      plan: 'enterprise',
      limits: { vaults: null, secrets: null, agents: null, requests_per_month: null },
    });
    expect((await api(mesh, 'GET', '/v1/billing/limits', { token: u.token })).body['plan']).toBe(
      'enterprise',
    );
  });
});
