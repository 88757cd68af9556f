import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { api, expectProblem, quickUser } from '../src/api';
import { sqlOn } from '../src/db';
import { sharedMesh, type Mesh } from '../src/mesh';

type User = Awaited<ReturnType<typeof quickUser>>;

/**
 * vault-crypto answers repeated secret operations from a decision cache (ARCHITECTURE §1). What must
 * hold: a grant change through the API counts from the very next operation (policy bumps the org's
 * decision generation in Redis before it answers the change), answers that depend on the client's
 * address or the clock are never reused, and a cached answer is really reused (else the cache
 * would be a cost with no use).
 */
describe('policy decision cache: a grant change counts from the next read', () => {
  let mesh: Mesh;
  let owner: User;
  let redis: Redis;

  beforeAll(async () => {
    mesh = await sharedMesh();
    owner = await quickUser(mesh);
    if (!mesh.redis) throw new Error('the mesh runs no redis-server of its own');
    redis = new Redis(mesh.redis.testUrl, { maxRetriesPerRequest: 1 });
  });
  afterAll(async () => {
    redis?.disconnect();
    await mesh?.stop();
  });

  const generation = () => redis.get(`custos:policy:gen:${owner.orgId}`);

  /** A vault with one secret at `app/key`, an agent, and the agent's token once a grant exists. */
  async function setup() {
    const v = await api(mesh, 'POST', '/v1/vaults', {
      token: owner.token,
      body: { name: `dc-${randomBytes(4).toString('hex')}` },
    });
    expect(v.status).toBe(201);
    const vaultId = v.body['id'] as string;
    const put = await api(mesh, 'PUT', `/v1/vaults/${vaultId}/secrets/app/key`, {
      token: owner.token,
      body: { value: 'decision-cache-value' },
    });
    expect(put.status).toBe(201);
    const created = await api(mesh, 'POST', '/v1/agents', {
      token: owner.token,
      body: { name: `dc-${randomBytes(3).toString('hex')}` },
    });
    expect(created.status).toBe(201);
    const agentId = (created.body['agent'] as { id: string }).id;
    const apiKey = created.body['api_key'] as string;
    const grant = async (body: Record<string, unknown> = {}) => {
      const r = await api(mesh, 'POST', `/v1/vaults/${vaultId}/policies`, {
        token: owner.token,
        body: {
          secret_path_pattern: 'app/*',
          principal_type: 'agent',
          principal_id: agentId,
          permissions: ['read'],
          ...body,
        },
      });
      expect(r.status).toBe(201);
      return r.body['id'] as string;
    };
    const agentToken = async () => {
      const t = await api(mesh, 'POST', '/v1/auth/agent-token', {
        body: { agent_id: agentId, api_key: apiKey },
      });
      expect(t.status).toBe(200);
      return t.body['access_token'] as string;
    };
    const read = (token: string) => api(mesh, 'GET', `/v1/vaults/${vaultId}/secrets/app/key`, { token });
    const revoke = (policyId: string) =>
      api(mesh, 'DELETE', `/v1/vaults/${vaultId}/policies/${policyId}`, { token: owner.token });
    return { vaultId, grant, agentToken, read, revoke };
  }

  it('refuses the very next read after the grant that allowed it (and was cached) is removed', async () => {
    const s = await setup();
    const policyId = await s.grant();
    const token = await s.agentToken();
    // The second read is answered from the cache.
    expect((await s.read(token)).status).toBe(200);
    expect((await s.read(token)).status).toBe(200);
    const before = await generation();
    expect((await s.revoke(policyId)).status).toBe(204);
    const after = await generation();
    expect(after).not.toBeNull();
    expect(after).not.toBe(before);
    const refused = await s.read(token);
    expectProblem(refused, 403);
  });

  it('refuses the very next read after a deny is added over a cached allow', async () => {
    const s = await setup();
    await s.grant();
    const token = await s.agentToken();
    expect((await s.read(token)).status).toBe(200);
    expect((await s.read(token)).status).toBe(200);
    await s.grant({ secret_path_pattern: 'app/key', effect: 'deny', priority: 5 });
    expectProblem(await s.read(token), 403);
  });

  it('lets a read through from the next request after the deny that refused it (and was cached) is removed', async () => {
    const s = await setup();
    await s.grant();
    const deny = await s.grant({ secret_path_pattern: 'app/key', effect: 'deny', priority: 5 });
    const token = await s.agentToken();
    // Refused by policy (the token's scopes cover the path), and that answer is cached too.
    expectProblem(await s.read(token), 403);
    expectProblem(await s.read(token), 403);
    expect((await s.revoke(deny)).status).toBe(204);
    expect((await s.read(token)).status).toBe(200);
  });

  it('reuses a cached answer: a grant removed behind policy (no generation bump) still reads until the generation moves', async () => {
    const s = await setup();
    const policyId = await s.grant();
    const token = await s.agentToken();
    expect((await s.read(token)).status).toBe(200);
    // Gone from policy's table without going through policy: nothing bumps the generation.
    await sqlOn(mesh, 'DELETE FROM policy.grants WHERE id = $1', [policyId]);
    expect((await s.read(token)).status).toBe(200);
    await redis.set(`custos:policy:gen:${owner.orgId}`, `moved-by-test-${randomBytes(4).toString('hex')}`);
    expectProblem(await s.read(token), 403);
  });

  it("mints the next agent token with the grants of that moment, though the agent's scopes were cached", async () => {
    const s = await setup();
    const claims = (token: string) =>
      JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
    const policyId = await s.grant();
    // The second exchange is answered from identity's scopes cache.
    expect(claims(await s.agentToken())).toMatchObject({ scopes: ['app/*'], vault_ids: [s.vaultId] });
    expect(claims(await s.agentToken())).toMatchObject({ scopes: ['app/*'], vault_ids: [s.vaultId] });
    expect((await s.revoke(policyId)).status).toBe(204);
    expect(claims(await s.agentToken())).toMatchObject({ scopes: [], vault_ids: [] });
    await s.grant({ secret_path_pattern: 'app/key' });
    expect(claims(await s.agentToken())).toMatchObject({ scopes: ['app/key'], vault_ids: [s.vaultId] });
  });

  it('asks policy on every read while a grant in play has an IP condition (its answer depends on the address)', async () => {
    const s = await setup();
    const policyId = await s.grant({ conditions: { ip_cidrs: ['0.0.0.0/0', '::/0'] } });
    const token = await s.agentToken();
    expect((await s.read(token)).status).toBe(200);
    expect((await s.read(token)).status).toBe(200);
    await sqlOn(mesh, 'DELETE FROM policy.grants WHERE id = $1', [policyId]);
    // No generation bump, and still refused at once: nothing was cached.
    expectProblem(await s.read(token), 403);
  });
});
