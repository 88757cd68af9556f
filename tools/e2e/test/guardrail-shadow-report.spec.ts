import type { JsonRpcProvider } from 'ethers';
import { waitFor } from '@custos/service-kit/testing';
import { api, expectProblem, quickUser } from '../src/api';
import { ETH, anvilAgent, anvilOf, auditRecords, randomAddress, settledTx, submitTx } from '../src/approvals';
import { invitedMember } from '../src/members';
import { type Mesh, sharedMesh } from '../src/mesh';

// Issue 20, SPEC §4.7: `GET /v1/org/guardrail-shadow-report?since=` counts the org's
// `guardrail_shadow.would_deny` records (what `log`-mode guardrails let through) by reason_code, for
// owners and admins. The records come from real transactions on the shared mesh's anvil.

type User = Awaited<ReturnType<typeof quickUser>>;

describe('guardrails: the shadow report (shared mesh, anvil)', () => {
  let mesh: Mesh;
  let chain: JsonRpcProvider;
  let owner: User;
  let admin: User;
  let member: User;
  let started: string;

  const report = (token: string, since?: string) =>
    api(mesh, 'GET', `/v1/org/guardrail-shadow-report${since ? `?since=${encodeURIComponent(since)}` : ''}`, {
      token,
    });

  beforeAll(async () => {
    mesh = await sharedMesh();
    chain = anvilOf(mesh);
    owner = await quickUser(mesh);
    admin = await invitedMember(mesh, owner, 'admin');
    member = await invitedMember(mesh, owner, 'member');
    started = new Date(Date.now() - 1000).toISOString();
  }, 60_000);
  afterAll(() => {
    chain?.destroy();
    return mesh?.stop();
  });

  it('is empty for an org whose guardrails never fired', async () => {
    const r = await report(owner.token);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ since: expect.any(String), total: 0, reason_codes: [] });
    // The default window is the last seven days.
    const since = Date.parse(r.body['since'] as string);
    expect(Math.abs(Date.now() - 7 * 86_400_000 - since)).toBeLessThan(60_000);
  });

  it('counts what log mode let through by reason_code, for owners and admins, only since `since`', async () => {
    // `log` is the default: the transaction over tx_max_value_eth goes through and is recorded.
    const agent = await anvilAgent(mesh, owner, { tx_max_value_eth: '0.1' });
    await chain.send('anvil_setBalance', [agent.address, `0x${(10n * ETH).toString(16)}`]);
    for (const value of ['0.5', '0.25']) {
      const r = await submitTx(mesh, agent, { chain: 'anvil', to: randomAddress(), value });
      expect(r.status).toBe(201);
      await settledTx(mesh, agent, r.body['id'] as string);
    }
    // Within the limit: nothing recorded.
    const ok = await submitTx(mesh, agent, { chain: 'anvil', to: randomAddress(), value: '0.05' });
    expect(ok.status).toBe(201);
    await auditRecords(mesh, owner.token, 'guardrail_shadow.would_deny', (e) => e['actor_id'] === agent.id);

    let body: Record<string, unknown> = {};
    await waitFor(
      async () => {
        body = (await report(admin.token, started)).body;
        return body['total'] === 2;
      },
      15_000,
      200,
    );
    expect(body).toEqual({
      since: started,
      total: 2,
      reason_codes: [{ reason_code: 'tx_max_value_exceeded', count: 2, last_at: expect.any(String) }],
    });
    // Another org sees none of it; a window starting later counts nothing.
    const stranger = await quickUser(mesh);
    expect((await report(stranger.token, started)).body).toMatchObject({ total: 0, reason_codes: [] });
    expect((await report(owner.token, new Date(Date.now() + 60_000).toISOString())).body).toMatchObject({
      total: 0,
    });
  });

  it('refuses members and agents (403), a malformed since (400) and no token (401)', async () => {
    expectProblem(await report(member.token), 403);
    const agent = await anvilAgent(mesh, owner);
    expectProblem(await report(agent.token), 403);
    expectProblem(await report(owner.token, 'last tuesday'), 400, { field: 'since' });
    expectProblem(await api(mesh, 'GET', '/v1/org/guardrail-shadow-report'), 401);
  });
});
