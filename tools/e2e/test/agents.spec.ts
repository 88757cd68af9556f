import { TEST_PASSWORD, api, decodePayload, expectProblem, quickUser } from '../src/api';
import { sharedMesh, type Mesh } from '../src/mesh';

describe('agents: registration, settings, key exchange, rotation, deactivation', () => {
  let mesh: Mesh;
  let owner: Awaited<ReturnType<typeof quickUser>>;

  beforeAll(async () => {
    mesh = await sharedMesh();
    owner = await quickUser(mesh);
  });
  afterAll(() => mesh?.stop());

  async function createAgent(fields: Record<string, unknown> = {}) {
    const r = await api(mesh, 'POST', '/v1/agents', {
      token: owner.token,
      body: { name: 'builder', ...fields },
    });
    expect(r.status).toBe(201);
    return { agent: r.body['agent'] as Record<string, unknown>, apiKey: r.body['api_key'] as string };
  }

  async function exchange(body: Record<string, unknown>) {
    return api(mesh, 'POST', '/v1/auth/agent-token', { body });
  }

  it('registers an agent with a one-time ocv_ key and the fields of spec §2.4', async () => {
    const { agent, apiKey } = await createAgent({
      description: 'reads deploy keys',
      intents_api_enabled: true,
      usdc_daily_limit_usd: 25,
      per_chain_guardrails: { ethereum: { gas_daily_budget_native: '0.5' } },
      execution_guardrails: { enforcement: 'enforce' },
      address_screening_policy: { mode: 'deny' },
      environment: 'preview',
    });
    expect(apiKey).toMatch(/^ocv_[A-Za-z0-9]{16}_[A-Za-z0-9]{43}$/);
    expect(agent).toMatchObject({
      name: 'builder',
      description: 'reads deploy keys',
      is_active: true,
      created_by: owner.userId,
      org_id: owner.orgId,
      intents_api_enabled: true,
      usdc_daily_limit_usd: 25,
      per_chain_guardrails: { ethereum: { gas_daily_budget_native: '0.5' } },
      execution_guardrails: { enforcement: 'enforce' },
      address_screening_policy: { mode: 'deny' },
      environment: 'preview',
      proxy_enabled: false,
      token_ttl_seconds: 3600,
    });
    expect(JSON.stringify(agent)).not.toContain(apiKey);

    const list = await api(mesh, 'GET', '/v1/agents', { token: owner.token });
    expect((list.body['agents'] as Array<{ id: string }>).map((a) => a.id)).toContain(agent['id']);
    const one = await api(mesh, 'GET', `/v1/agents/${String(agent['id'])}`, { token: owner.token });
    expect(one.body).toMatchObject({ id: agent['id'], name: 'builder' });
    expect(one.body).not.toHaveProperty('api_key');
  });

  it('refuses invalid fields with 400 naming the field, and creates nothing', async () => {
    const before = (
      (await api(mesh, 'GET', '/v1/agents', { token: owner.token })).body['agents'] as unknown[]
    ).length;
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ eip712_default_policy: 'maybe' }, 'eip712_default_policy'],
      [{ usdc_daily_limit_usd: -1 }, 'usdc_daily_limit_usd'],
      [{ environment: 'staging' }, 'environment'],
      [{ address_screening_policy: { mode: 'sometimes' } }, 'address_screening_policy.mode'],
      [{ execution_guardrails: { enforcement: 'strict' } }, 'execution_guardrails.enforcement'],
      [
        { per_chain_guardrails: { ethereum: { gas_daily_budget_native: '-3' } } },
        'per_chain_guardrails.ethereum.gas_daily_budget_native',
      ],
      [{ token_ttl_seconds: 5 }, 'token_ttl_seconds'],
      [{ api_key_expires_at: '2001-01-01T00:00:00Z' }, 'api_key_expires_at'],
      [{ intents_api_enabled: 'yes' }, 'intents_api_enabled'],
      [{ colour: 'blue' }, 'colour'],
      [{ name: '' }, 'name'],
    ];
    for (const [fields, field] of cases) {
      const r = await api(mesh, 'POST', '/v1/agents', { token: owner.token, body: { name: 'x', ...fields } });
      expect({ field, status: r.status }).toEqual({ field, status: 400 });
      expect(r.body['field']).toBe(field);
      expect(r.body['detail']).toContain(field);
    }
    const missing = await api(mesh, 'POST', '/v1/agents', { token: owner.token, body: {} });
    expect(missing.body).toMatchObject({ status: 400, field: 'name' });
    const after = ((await api(mesh, 'GET', '/v1/agents', { token: owner.token })).body['agents'] as unknown[])
      .length;
    expect(after).toBe(before);
  });

  it('takes tx_max_value and tx_daily_limit as the reference names of the _eth limits, and shows both', async () => {
    const { agent } = await createAgent({ tx_max_value: '1.5', tx_daily_limit_eth: '4' });
    expect(agent).toMatchObject({
      tx_max_value: '1.5',
      tx_max_value_eth: '1.5',
      tx_daily_limit: '4',
      tx_daily_limit_eth: '4',
    });
    const id = String(agent['id']);
    const patch = (body: Record<string, unknown>) =>
      api(mesh, 'PATCH', `/v1/agents/${id}`, { confirm: TEST_PASSWORD, token: owner.token, body });
    // Two values for one limit: 400 naming the alias, nothing changed.
    expectProblem(await patch({ tx_max_value: '2', tx_max_value_eth: '3' }), 400, { field: 'tx_max_value' });
    expect((await patch({ tx_max_value: '2', tx_max_value_eth: '2' })).body).toMatchObject({
      tx_max_value_eth: '2',
    });
    const cleared = await patch({ tx_daily_limit: null });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toMatchObject({ tx_daily_limit: null, tx_daily_limit_eth: null, tx_max_value: '2' });
  });

  it('clears the stablecoin cap with an explicit null and keeps it when the field is absent', async () => {
    const { agent } = await createAgent({ usdc_daily_limit_usd: 10 });
    const id = String(agent['id']);
    const renamed = await api(mesh, 'PATCH', `/v1/agents/${id}`, {
      confirm: TEST_PASSWORD,
      token: owner.token,
      body: { name: 'renamed' },
    });
    expect(renamed.body).toMatchObject({ name: 'renamed', usdc_daily_limit_usd: 10 });
    const cleared = await api(mesh, 'PATCH', `/v1/agents/${id}`, {
      confirm: TEST_PASSWORD,
      token: owner.token,
      body: { usdc_daily_limit_usd: null },
    });
    expect(cleared.status).toBe(200);
    expect(cleared.body['usdc_daily_limit_usd']).toBeNull();
    const bad = await api(mesh, 'PATCH', `/v1/agents/${id}`, {
      confirm: TEST_PASSWORD,
      token: owner.token,
      body: { max_gas_limit: -5 },
    });
    expect(bad.body).toMatchObject({ status: 400, field: 'max_gas_limit' });
  });

  it('exchanges the key (with or without the agent id) for a JWT with the claims of spec §5.3', async () => {
    const { agent, apiKey } = await createAgent({ intents_api_enabled: true, scopes: ['deploy/**'] });
    const withId = await exchange({ agent_id: agent['id'], api_key: apiKey });
    expect(withId.status).toBe(200);
    expect(withId.body).toMatchObject({ token_type: 'Bearer', expires_in: 3600 });
    expect(withId.body).not.toHaveProperty('refresh_token');
    const claims = decodePayload(withId.body['access_token'] as string);
    expect(claims).toMatchObject({
      sub: `agent:${String(agent['id'])}`,
      org: owner.orgId,
      scopes: ['deploy/**'],
      vault_ids: [],
      intents_api_enabled: true,
      environment: 'production',
      created_by: owner.userId,
      token_use: 'access',
    });
    expect(claims).not.toHaveProperty('proxy_config');
    expect((claims['exp'] as number) - (claims['iat'] as number)).toBe(3600);

    const keyOnly = await exchange({ api_key: apiKey });
    expect(keyOnly.status).toBe(200);
    const noScopes = await createAgent();
    const plain = decodePayload(
      (await exchange({ api_key: noScopes.apiKey })).body['access_token'] as string,
    );
    expect(plain['scopes']).toEqual([]);
    expect(plain).not.toHaveProperty('intents_api_enabled');
  });

  it('ignores a stray Authorization header on the public exchange (it is not forwarded to policy)', async () => {
    const a = await createAgent();
    const stranger = await quickUser(mesh);
    for (const token of [stranger.token, 'not-a-jwt']) {
      const r = await api(mesh, 'POST', '/v1/auth/agent-token', { token, body: { api_key: a.apiKey } });
      expect(r.status).toBe(200);
      expect(r.body['access_token']).toEqual(expect.any(String));
    }
  });

  it('refuses a wrong key, a key with another agent id, and garbage alike with 401', async () => {
    const a = await createAgent();
    const b = await createAgent();
    const tampered = `${a.apiKey.slice(0, -1)}${a.apiKey.endsWith('A') ? 'B' : 'A'}`;
    for (const body of [
      { api_key: tampered },
      { agent_id: b.agent['id'], api_key: a.apiKey },
      { api_key: 'ocv_garbage' },
      { api_key: '' },
      {},
    ]) {
      const r = await exchange(body);
      expect(r.status).toBe(401);
      expect(r.body).toMatchObject({ status: 401, detail: expect.any(String) });
    }
  });

  it('lets an agent read itself, and refuses it human and management routes', async () => {
    const { agent, apiKey } = await createAgent();
    const token = (await exchange({ api_key: apiKey })).body['access_token'] as string;
    const me = await api(mesh, 'GET', '/v1/agents/me', { token });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({
      id: agent['id'],
      created_by: owner.userId,
      org_id: owner.orgId,
      scopes: [],
    });
    expect((await api(mesh, 'GET', '/v1/auth/me', { token })).status).toBe(403);
    expect((await api(mesh, 'POST', '/v1/agents', { token, body: { name: 'child' } })).status).toBe(403);
    // Refused as an agent on a human-only route, not as a failed step-up (an agent has no password).
    const rotate = await api(mesh, 'POST', `/v1/agents/${String(agent['id'])}/rotate-key`, {
      confirm: TEST_PASSWORD,
      token,
    });
    expect(rotate.status).toBe(403);
    expect(rotate.body['type']).not.toBe('step_up_required');
    expect((await api(mesh, 'GET', '/v1/agents/me', { token: owner.token })).status).toBe(403);
  });

  it('lets an agent sign its own token out', async () => {
    const { apiKey } = await createAgent();
    const token = (await exchange({ api_key: apiKey })).body['access_token'] as string;
    expect((await api(mesh, 'DELETE', '/v1/auth/token', { token })).status).toBe(204);
    expect((await api(mesh, 'GET', '/v1/agents/me', { token })).status).toBe(401);
    expect((await exchange({ api_key: apiKey })).status).toBe(200);
  });

  it('caps the token lifetime at the key expiry and refuses unknown inherited field names', async () => {
    const expires = new Date(Date.now() + 90_000).toISOString();
    const { apiKey } = await createAgent({ api_key_expires_at: expires });
    const t = await exchange({ api_key: apiKey });
    expect(t.body['expires_in']).toBeLessThanOrEqual(90);
    for (const field of ['constructor', 'toString', '__proto__']) {
      const r = await api(mesh, 'POST', '/v1/agents', {
        token: owner.token,
        raw: `{"name":"x","${field}":1}`,
      });
      expect(r.status).toBe(400);
    }
  });

  it('rotates the key: the old key and the tokens minted from it stop working at once', async () => {
    const { agent, apiKey } = await createAgent();
    const id = String(agent['id']);
    const oldToken = (await exchange({ api_key: apiKey })).body['access_token'] as string;
    expect((await api(mesh, 'GET', '/v1/agents/me', { token: oldToken })).status).toBe(200);
    const rotated = await api(mesh, 'POST', `/v1/agents/${id}/rotate-key`, {
      confirm: TEST_PASSWORD,
      token: owner.token,
    });
    expect(rotated.status).toBe(200);
    const newKey = rotated.body['api_key'] as string;
    expect(newKey).not.toBe(apiKey);
    expect((await exchange({ api_key: apiKey })).status).toBe(401);
    expect((await api(mesh, 'GET', '/v1/agents/me', { token: oldToken })).status).toBe(401);
    const fresh = await exchange({ agent_id: id, api_key: newKey });
    expect(fresh.status).toBe(200);
    expect(
      (await api(mesh, 'GET', '/v1/agents/me', { token: fresh.body['access_token'] as string })).status,
    ).toBe(200);
  });

  it('deactivates on DELETE: keys and tokens stop, the record stays', async () => {
    const { agent, apiKey } = await createAgent();
    const id = String(agent['id']);
    const token = (await exchange({ api_key: apiKey })).body['access_token'] as string;
    expect((await api(mesh, 'DELETE', `/v1/agents/${id}`, { token: owner.token })).status).toBe(204);
    expect((await api(mesh, 'GET', '/v1/agents/me', { token })).status).toBe(401);
    expect((await exchange({ api_key: apiKey })).status).toBe(401);
    const after = await api(mesh, 'GET', `/v1/agents/${id}`, { token: owner.token });
    expect(after.body).toMatchObject({ id, is_active: false });
  });

  it('keeps agents inside their org: another org gets 404, a malformed id 400', async () => {
    const { agent } = await createAgent();
    const stranger = await quickUser(mesh);
    const id = String(agent['id']);
    expect((await api(mesh, 'GET', `/v1/agents/${id}`, { token: stranger.token })).status).toBe(404);
    expect(
      (
        await api(mesh, 'POST', `/v1/agents/${id}/rotate-key`, {
          confirm: TEST_PASSWORD,
          token: stranger.token,
        })
      ).status,
    ).toBe(404);
    expect((await api(mesh, 'DELETE', `/v1/agents/${id}`, { token: stranger.token })).status).toBe(404);
    const list = await api(mesh, 'GET', '/v1/agents', { token: stranger.token });
    expect(list.body['agents']).toEqual([]);
    const bad = await api(mesh, 'GET', '/v1/agents/not-a-uuid', { token: owner.token });
    expect(bad.body).toMatchObject({ status: 400, field: 'agent_id' });
    expect((await api(mesh, 'GET', `/v1/agents/${id}`)).status).toBe(401);
  });
});
