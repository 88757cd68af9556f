import type { JsonRpcProvider } from 'ethers';
import { TEST_PASSWORD, api, expectProblem, quickUser } from '../src/api';
import { ETH, anvilAgent, anvilOf, auditRecords, randomAddress, settledTx, submitTx } from '../src/approvals';
import { type Mesh, sharedMesh } from '../src/mesh';

// Issue 20: spend caps in money. `usd_daily_limit_usd` values an agent's spend of the UTC day over
// all chains in USD (the shared mesh's test profile prices anvil's ETH at $2,000 through
// PRICE_TABLE_USD) and refuses, whatever the enforcement mode, once the next transaction would pass
// it; parallel transactions cannot pass it together.

type User = Awaited<ReturnType<typeof quickUser>>;

describe('guardrails: a USD cap on the day’s valued spend (shared mesh, anvil)', () => {
  let mesh: Mesh;
  let chain: JsonRpcProvider;
  let owner: User;

  beforeAll(async () => {
    mesh = await sharedMesh();
    chain = anvilOf(mesh);
    owner = await quickUser(mesh);
  }, 60_000);
  afterAll(() => {
    chain?.destroy();
    return mesh?.stop();
  });

  const funded = async (settings: Record<string, unknown>) => {
    const a = await anvilAgent(mesh, owner, settings);
    await chain.send('anvil_setBalance', [a.address, `0x${(10n * ETH).toString(16)}`]);
    return a;
  };

  it('refuses the transaction that would pass the cap (403 naming it, audited), in log mode too', async () => {
    // $1,000 a day = 0.5 ETH at $2,000; `log` is the default enforcement.
    const agent = await funded({ usd_daily_limit_usd: 1000 });
    const first = await submitTx(mesh, agent, { chain: 'anvil', to: randomAddress(), value: '0.4' });
    expect(first.status).toBe(201);
    await settledTx(mesh, agent, first.body['id'] as string);
    const to = randomAddress();
    expectProblem(await submitTx(mesh, agent, { chain: 'anvil', to, value: '0.2' }), 403, {
      type: 'guardrail_violation',
      reason_code: 'usd_daily_limit_exceeded',
      field: 'usd_daily_limit_usd',
    });
    expect(await chain.getBalance(to)).toBe(0n);
    await auditRecords(
      mesh,
      owner.token,
      'agent.transaction.refused',
      (e) =>
        e['actor_id'] === agent.id &&
        (e['details'] as Record<string, unknown>)['reason_code'] === 'usd_daily_limit_exceeded',
    );
    // What is left of the day still goes: $200.
    const last = await submitTx(mesh, agent, { chain: 'anvil', to, value: '0.1' });
    expect(last.status).toBe(201);
    await settledTx(mesh, agent, last.body['id'] as string);
    expect(await chain.getBalance(to)).toBe(ETH / 10n);
  });

  it('20 parallel transactions of $100 against a $500 day broadcast exactly 5', async () => {
    const agent = await funded({ usd_daily_limit_usd: 500 });
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        submitTx(mesh, agent, { chain: 'anvil', to: randomAddress(), value: '0.05' }),
      ),
    );
    const sent = answers.filter((a) => a.status === 201);
    expect(sent).toHaveLength(5);
    for (const a of answers.filter((x) => x.status !== 201))
      expect({ status: a.status, reason: a.body['reason_code'] }).toEqual({
        status: 403,
        reason: 'usd_daily_limit_exceeded',
      });
    for (const a of sent) await settledTx(mesh, agent, a.body['id'] as string);
  });

  it('takes nothing from an agent without a cap, and a cleared cap stops applying', async () => {
    const agent = await funded({ usd_daily_limit_usd: 100 });
    expect((await submitTx(mesh, agent, { chain: 'anvil', to: randomAddress(), value: '0.06' })).status).toBe(
      403,
    );
    const cleared = await api(mesh, 'PATCH', `/v1/agents/${agent.id}`, {
      token: owner.token,
      body: { usd_daily_limit_usd: null },
      confirm: TEST_PASSWORD,
    });
    expect({ status: cleared.status, cap: cleared.body['usd_daily_limit_usd'] }).toEqual({
      status: 200,
      cap: null,
    });
    const r = await submitTx(mesh, agent, { chain: 'anvil', to: randomAddress(), value: '0.06' });
    expect(r.status).toBe(201);
    await settledTx(mesh, agent, r.body['id'] as string);
  });
});
