import { TEST_PASSWORD, api, decodePayload, quickUser } from '../src/api';
import { sharedMesh, type Mesh } from '../src/mesh';

const ROUTER_KEY = /^sk-proxy-v1-[A-Za-z0-9]{16}_[A-Za-z0-9]{43}$/;

describe('router keys: issue, list, exchange for a 60-second agent token, revoke', () => {
  let mesh: Mesh;
  let owner: Awaited<ReturnType<typeof quickUser>>;

  beforeAll(async () => {
    mesh = await sharedMesh();
    owner = await quickUser(mesh);
  });
  afterAll(() => mesh?.stop());

  async function createAgent(fields: Record<string, unknown> = {}) {
    const r = await api(mesh, 'POST', '/v1/agents', { token: owner.token, body: { name: 'llm', ...fields } });
    expect(r.status).toBe(201);
    const agent = r.body['agent'] as Record<string, unknown>;
    return { id: String(agent['id']), apiKey: String(r.body['api_key']) };
  }

  // Issuing a router key needs the step-up `agent.router_key.create` (step-up.spec.ts tests its refusals).
  async function createKey(agentId: string, body: Record<string, unknown> = {}, token = owner.token) {
    return api(mesh, 'POST', `/v1/agents/${agentId}/router-keys`, { token, body, confirm: TEST_PASSWORD });
  }

  async function listKeys(agentId: string, token = owner.token) {
    return api(mesh, 'GET', `/v1/agents/${agentId}/router-keys`, { token });
  }

  const exchange = (body: Record<string, unknown>) => api(mesh, 'POST', '/v1/auth/agent-token', { body });

  function expectRefusedExchange(r: Awaited<ReturnType<typeof exchange>>) {
    expect(r.status).toBe(401);
    expect(r.body).toMatchObject({ status: 401, detail: 'invalid agent credentials' });
    expect(r.body).not.toHaveProperty('access_token');
  }

  it('issues a key once, exchanges it for an agent token with the router_key claim and 60 s', async () => {
    const proxyConfig = { allowed_models: ['gpt-x'], max_tokens: 1000 };
    const agent = await createAgent({ proxy_enabled: true, proxy_config: proxyConfig, scopes: ['llm/**'] });
    const created = await createKey(agent.id, { max_concurrent_streams: 4, spend_cap_micro_usd: 2_500_000 });
    expect(created.status).toBe(201);
    expect(created.headers.get('cache-control')).toBe('no-store');
    const routerKey = String(created.body['router_key']);
    expect(routerKey).toMatch(ROUTER_KEY);
    expect(created.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      router_key: routerKey,
      agent_id: agent.id,
      max_concurrent_streams: 4,
      spend_cap_micro_usd: 2_500_000,
      created_at: expect.any(String),
    });

    const t = await exchange({ api_key: routerKey });
    expect(t.status).toBe(200);
    expect(t.headers.get('cache-control')).toBe('no-store');
    expect(t.body).toMatchObject({ token_type: 'Bearer', expires_in: 60 });
    expect(t.body).not.toHaveProperty('refresh_token');
    const claims = decodePayload(String(t.body['access_token']));
    expect(claims).toMatchObject({
      sub: `agent:${agent.id}`,
      org: owner.orgId,
      scopes: ['llm/**'],
      vault_ids: [],
      proxy_enabled: true,
      proxy_config: proxyConfig,
      created_by: owner.userId,
      router_key: { id: created.body['id'], max_concurrent_streams: 4, spend_cap_micro_usd: 2_500_000 },
    });
    expect(Number(claims['exp']) - Number(claims['iat'])).toBe(60);
    expect(claims['sid']).toBe(routerKey.slice('sk-proxy-v1-'.length, 'sk-proxy-v1-'.length + 16));

    // The token works as an agent token.
    const me = await api(mesh, 'GET', '/v1/agents/me', { token: String(t.body['access_token']) });
    expect(me.status).toBe(200);
    expect(me.body['id']).toBe(agent.id);

    // With the matching agent id too; a key without limits carries only its id.
    expect((await exchange({ api_key: routerKey, agent_id: agent.id })).status).toBe(200);
    const plain = await createKey(agent.id);
    expect(plain.body).toMatchObject({ max_concurrent_streams: null, spend_cap_micro_usd: null });
    const pt = await exchange({ api_key: plain.body['router_key'] });
    expect(decodePayload(String(pt.body['access_token']))['router_key']).toEqual({ id: plain.body['id'] });
  });

  it('lists keys without their secrets', async () => {
    const agent = await createAgent({ proxy_enabled: true });
    const a = await createKey(agent.id, { max_concurrent_streams: 1 });
    const b = await createKey(agent.id);
    const list = await listKeys(agent.id);
    expect(list.status).toBe(200);
    const keys = list.body['router_keys'] as Array<Record<string, unknown>>;
    expect(keys.map((k) => k['id'])).toEqual([a.body['id'], b.body['id']]);
    expect(keys[0]).toEqual({
      id: a.body['id'],
      agent_id: agent.id,
      key_prefix: String(a.body['router_key']).split('_')[0],
      max_concurrent_streams: 1,
      spend_cap_micro_usd: null,
      is_active: true,
      created_by: owner.userId,
      created_at: a.body['created_at'],
      revoked_at: null,
    });
    const text = JSON.stringify(list.body);
    for (const k of [a, b]) expect(text).not.toContain(String(k.body['router_key']).split('_')[1]);
  });

  it('revokes a key: its exchange and the tokens minted from it answer 401 at once', async () => {
    const agent = await createAgent({ proxy_enabled: true });
    const created = await createKey(agent.id);
    const other = await createKey(agent.id);
    const keyId = String(created.body['id']);
    const t = await exchange({ api_key: created.body['router_key'] });
    const token = String(t.body['access_token']);
    const otherToken = String((await exchange({ api_key: other.body['router_key'] })).body['access_token']);
    expect((await api(mesh, 'GET', '/v1/agents/me', { token })).status).toBe(200);

    const del = await api(mesh, 'DELETE', `/v1/agents/${agent.id}/router-keys/${keyId}`, {
      token: owner.token,
    });
    expect(del.status).toBe(204);
    expectRefusedExchange(await exchange({ api_key: created.body['router_key'] }));
    expect((await api(mesh, 'GET', '/v1/agents/me', { token })).status).toBe(401);
    // The agent's other key and its tokens are untouched.
    expect((await api(mesh, 'GET', '/v1/agents/me', { token: otherToken })).status).toBe(200);
    expect((await exchange({ api_key: other.body['router_key'] })).status).toBe(200);

    const listed = (await listKeys(agent.id)).body['router_keys'] as Array<Record<string, unknown>>;
    expect(listed.find((k) => k['id'] === keyId)).toMatchObject({
      is_active: false,
      revoked_at: expect.any(String),
    });
    // A second revoke, an unknown key and a key of another agent: 404.
    const again = await api(mesh, 'DELETE', `/v1/agents/${agent.id}/router-keys/${keyId}`, {
      token: owner.token,
    });
    expect(again.body).toMatchObject({ status: 404 });
    const otherAgent = await createAgent({ proxy_enabled: true });
    const wrong = await api(
      mesh,
      'DELETE',
      `/v1/agents/${otherAgent.id}/router-keys/${String(other.body['id'])}`,
      { token: owner.token },
    );
    expect(wrong.status).toBe(404);
    expect((await exchange({ api_key: other.body['router_key'] })).status).toBe(200);
    const badId = await api(mesh, 'DELETE', `/v1/agents/${agent.id}/router-keys/nope`, {
      token: owner.token,
    });
    expect(badId.body).toMatchObject({ status: 400, field: 'key_id' });
  });

  it('refuses unknown, malformed and mismatched router keys with the same 401 body', async () => {
    const agent = await createAgent({ proxy_enabled: true });
    const created = await createKey(agent.id);
    const key = String(created.body['router_key']);
    const otherAgent = await createAgent({ proxy_enabled: true });
    const forged = `${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}`;
    for (const body of [
      { api_key: forged },
      { api_key: 'sk-proxy-v1-short' },
      { api_key: `sk-proxy-v1-${'A'.repeat(16)}_${'b'.repeat(43)}` },
      { api_key: key, agent_id: otherAgent.id },
    ]) {
      expectRefusedExchange(await exchange(body));
    }
    // An ordinary agent key still takes the agent-key path.
    const { id, apiKey } = await createAgent();
    expect((await exchange({ agent_id: id, api_key: apiKey })).status).toBe(200);
  });

  it('refuses a key for an agent without proxy (409) and creates nothing', async () => {
    const agent = await createAgent();
    const r = await createKey(agent.id);
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({ status: 409, field: 'proxy_enabled' });
    expect(String(r.body['detail'])).toContain('proxy_enabled');
    expect((await listKeys(agent.id)).body['router_keys']).toEqual([]);
  });

  it('stops exchanges once proxy is disabled or the agent is deactivated (401)', async () => {
    const agent = await createAgent({ proxy_enabled: true });
    const key = (await createKey(agent.id)).body['router_key'];
    expect((await exchange({ api_key: key })).status).toBe(200);
    const off = await api(mesh, 'PATCH', `/v1/agents/${agent.id}`, {
      confirm: TEST_PASSWORD,
      token: owner.token,
      body: { proxy_enabled: false },
    });
    expect(off.status).toBe(200);
    expectRefusedExchange(await exchange({ api_key: key }));
    // Turning proxy back on makes the (unrevoked) key usable again.
    await api(mesh, 'PATCH', `/v1/agents/${agent.id}`, {
      confirm: TEST_PASSWORD,
      token: owner.token,
      body: { proxy_enabled: true },
    });
    expect((await exchange({ api_key: key })).status).toBe(200);
    expect((await api(mesh, 'DELETE', `/v1/agents/${agent.id}`, { token: owner.token })).status).toBe(204);
    expectRefusedExchange(await exchange({ api_key: key }));
    const create = await createKey(agent.id);
    expect(create.status).toBe(409);
  });

  it('refuses agent callers (403) and other orgs (404), changing nothing', async () => {
    const agent = await createAgent({ proxy_enabled: true });
    const key = await createKey(agent.id);
    const agentToken = String(
      (await exchange({ agent_id: agent.id, api_key: agent.apiKey })).body['access_token'],
    );
    const routerToken = String((await exchange({ api_key: key.body['router_key'] })).body['access_token']);
    for (const token of [agentToken, routerToken]) {
      const c = await createKey(agent.id, {}, token);
      expect(c.status).toBe(403);
      expect(c.body).toMatchObject({ status: 403 });
      expect((await listKeys(agent.id, token)).status).toBe(403);
      const d = await api(mesh, 'DELETE', `/v1/agents/${agent.id}/router-keys/${String(key.body['id'])}`, {
        token,
      });
      expect(d.status).toBe(403);
    }

    const stranger = await quickUser(mesh);
    const c = await createKey(agent.id, {}, stranger.token);
    expect(c.status).toBe(404);
    expect(c.body).toMatchObject({ status: 404 });
    expect((await listKeys(agent.id, stranger.token)).status).toBe(404);
    const d = await api(mesh, 'DELETE', `/v1/agents/${agent.id}/router-keys/${String(key.body['id'])}`, {
      token: stranger.token,
    });
    expect(d.status).toBe(404);
    expect(await api(mesh, 'POST', `/v1/agents/${agent.id}/router-keys`, {})).toMatchObject({ status: 401 });

    const keys = (await listKeys(agent.id)).body['router_keys'] as Array<Record<string, unknown>>;
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ id: key.body['id'], is_active: true });
    expect((await exchange({ api_key: key.body['router_key'] })).status).toBe(200);
  });

  it('refuses bad fields with 400 naming the field, and creates nothing', async () => {
    const agent = await createAgent({ proxy_enabled: true });
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ max_concurrent_streams: -1 }, 'max_concurrent_streams'],
      [{ max_concurrent_streams: 2.5 }, 'max_concurrent_streams'],
      [{ max_concurrent_streams: '3' }, 'max_concurrent_streams'],
      [{ spend_cap_micro_usd: -5 }, 'spend_cap_micro_usd'],
      [{ spend_cap_micro_usd: 1.25 }, 'spend_cap_micro_usd'],
      [{ spend_cap_micro_usd: 'lots' }, 'spend_cap_micro_usd'],
      [{ spend_cap: 10 }, 'spend_cap'],
    ];
    for (const [body, field] of cases) {
      const r = await createKey(agent.id, body);
      expect({ field, status: r.status }).toEqual({ field, status: 400 });
      expect(r.body['field']).toBe(field);
      expect(String(r.body['detail'])).toContain(field);
    }
    const badAgent = await createKey('not-a-uuid');
    expect(badAgent.body).toMatchObject({ status: 400, field: 'agent_id' });
    const arr = await api(mesh, 'POST', `/v1/agents/${agent.id}/router-keys`, {
      token: owner.token,
      confirm: TEST_PASSWORD,
      raw: '[1]',
    });
    expect(arr.body).toMatchObject({ status: 400, field: 'body' });
    expect((await listKeys(agent.id)).body['router_keys']).toEqual([]);
  });
});
