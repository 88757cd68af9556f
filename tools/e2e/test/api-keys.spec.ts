import { TEST_PASSWORD, api, decodePayload, quickUser } from '../src/api';
import { sharedMesh, type Mesh } from '../src/mesh';

describe('personal API keys', () => {
  let mesh: Mesh;
  let user: Awaited<ReturnType<typeof quickUser>>;

  beforeAll(async () => {
    mesh = await sharedMesh();
    user = await quickUser(mesh);
  });
  afterAll(() => mesh?.stop());

  it('creates a csk_ key shown once, lists it without the secret, and exchanges it for a user token', async () => {
    const created = await api(mesh, 'POST', '/v1/auth/api-keys', {
      confirm: TEST_PASSWORD,
      token: user.token,
      body: { name: 'ci' },
    });
    expect(created.status).toBe(201);
    const key = created.body['api_key'] as string;
    expect(key).toMatch(/^csk_[A-Za-z0-9]{16}_[A-Za-z0-9]{43}$/);
    const view = created.body['key'] as Record<string, unknown>;
    expect(view).toMatchObject({ name: 'ci', is_active: true, expires_at: null });
    expect(key.startsWith(String(view['key_prefix']))).toBe(true);

    const list = await api(mesh, 'GET', '/v1/auth/api-keys', { token: user.token });
    expect(JSON.stringify(list.body)).not.toContain(key.split('_')[2]);
    expect((list.body['keys'] as Array<{ id: string }>).map((k) => k.id)).toContain(view['id']);

    const exchanged = await api(mesh, 'POST', '/v1/auth/api-key-token', { body: { api_key: key } });
    expect(exchanged.status).toBe(200);
    const claims = decodePayload(exchanged.body['access_token'] as string);
    expect(claims).toMatchObject({ sub: `user:${user.userId}`, org: user.orgId, amr: ['api_key'] });
    expect(exchanged.body).not.toHaveProperty('refresh_token');
    expect(
      (await api(mesh, 'GET', '/v1/auth/me', { token: exchanged.body['access_token'] as string })).status,
    ).toBe(200);
  });

  it('signs out a token minted from a key without touching the key', async () => {
    const created = await api(mesh, 'POST', '/v1/auth/api-keys', {
      confirm: TEST_PASSWORD,
      token: user.token,
      body: { name: 'signout' },
    });
    const key = created.body['api_key'] as string;
    const token = (await api(mesh, 'POST', '/v1/auth/api-key-token', { body: { api_key: key } })).body[
      'access_token'
    ] as string;
    expect((await api(mesh, 'DELETE', '/v1/auth/token', { token })).status).toBe(204);
    expect((await api(mesh, 'GET', '/v1/auth/me', { token })).status).toBe(401);
    const again = await api(mesh, 'POST', '/v1/auth/api-key-token', { body: { api_key: key } });
    expect(again.status).toBe(200);
    expect(
      (await api(mesh, 'GET', '/v1/auth/me', { token: again.body['access_token'] as string })).status,
    ).toBe(200);
  });

  it('revokes a key: the key and the tokens minted from it stop at once', async () => {
    const created = await api(mesh, 'POST', '/v1/auth/api-keys', {
      confirm: TEST_PASSWORD,
      token: user.token,
      body: { name: 'temp' },
    });
    const key = created.body['api_key'] as string;
    const id = (created.body['key'] as { id: string }).id;
    const token = (await api(mesh, 'POST', '/v1/auth/api-key-token', { body: { api_key: key } })).body[
      'access_token'
    ] as string;
    expect((await api(mesh, 'DELETE', `/v1/auth/api-keys/${id}`, { token: user.token })).status).toBe(204);
    expect((await api(mesh, 'POST', '/v1/auth/api-key-token', { body: { api_key: key } })).status).toBe(401);
    expect((await api(mesh, 'GET', '/v1/auth/me', { token })).status).toBe(401);
    expect((await api(mesh, 'DELETE', `/v1/auth/api-keys/${id}`, { token: user.token })).status).toBe(404);
    const list = await api(mesh, 'GET', '/v1/auth/api-keys', { token: user.token });
    expect(
      (list.body['keys'] as Array<{ id: string; is_active: boolean }>).find((k) => k.id === id)?.is_active,
    ).toBe(false);
  });

  it('gives a key with an expiry tokens that end with it; refuses a past expiry and bad input', async () => {
    const soon = new Date(Date.now() + 120_000).toISOString();
    const created = await api(mesh, 'POST', '/v1/auth/api-keys', {
      confirm: TEST_PASSWORD,
      token: user.token,
      body: { name: 'short', expires_at: soon },
    });
    expect(created.status).toBe(201);
    const t = await api(mesh, 'POST', '/v1/auth/api-key-token', {
      body: { api_key: created.body['api_key'] },
    });
    expect(t.body['expires_in']).toBeLessThanOrEqual(120);
    const past = await api(mesh, 'POST', '/v1/auth/api-keys', {
      confirm: TEST_PASSWORD,
      token: user.token,
      body: { name: 'old', expires_at: '2000-01-01T00:00:00Z' },
    });
    expect(past.body).toMatchObject({ status: 400, field: 'expires_at' });
    expect(
      (await api(mesh, 'POST', '/v1/auth/api-keys', { confirm: TEST_PASSWORD, token: user.token, body: {} }))
        .body,
    ).toMatchObject({ field: 'name' });
    expect(
      (
        await api(mesh, 'POST', '/v1/auth/api-keys', {
          confirm: TEST_PASSWORD,
          token: user.token,
          body: { name: 'x', expires_at: 7 },
        })
      ).body,
    ).toMatchObject({
      field: 'expires_at',
    });
  });

  it('keeps keys to their owner and to humans', async () => {
    const created = await api(mesh, 'POST', '/v1/auth/api-keys', {
      confirm: TEST_PASSWORD,
      token: user.token,
      body: { name: 'mine' },
    });
    const id = (created.body['key'] as { id: string }).id;
    const other = await quickUser(mesh);
    expect((await api(mesh, 'DELETE', `/v1/auth/api-keys/${id}`, { token: other.token })).status).toBe(404);
    expect((await api(mesh, 'GET', '/v1/auth/api-keys', { token: other.token })).body['keys']).toEqual([]);
    const agent = await api(mesh, 'POST', '/v1/agents', { token: user.token, body: { name: 'a' } });
    const agentToken = (
      await api(mesh, 'POST', '/v1/auth/agent-token', { body: { api_key: agent.body['api_key'] } })
    ).body['access_token'] as string;
    expect(
      (
        await api(mesh, 'POST', '/v1/auth/api-keys', {
          confirm: TEST_PASSWORD,
          token: agentToken,
          body: { name: 'x' },
        })
      ).status,
    ).toBe(403);
    for (const bad of ['csk_nope', `${String(created.body['api_key']).slice(0, -2)}zz`, 'ocv_x']) {
      expect((await api(mesh, 'POST', '/v1/auth/api-key-token', { body: { api_key: bad } })).status).toBe(
        401,
      );
    }
  });
});
