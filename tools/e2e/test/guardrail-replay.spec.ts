import type { JsonRpcProvider } from 'ethers';
import { api, expectProblem, quickUser } from '../src/api';
import {
  type AnvilAgent,
  ETH,
  anvilAgent,
  anvilOf,
  randomAddress,
  settledTx,
  submitTx,
} from '../src/approvals';
import { sqlOn } from '../src/db';
import { invitedMember } from '../src/members';
import { type Mesh, sharedMesh } from '../src/mesh';

// Issue 20, SPEC §4.4: `POST /v1/agents/{id}/guardrails/replay {days, draft_guardrails}` judges a
// draft against the agent's real transactions (signed on the shared mesh's anvil) and writes
// nothing: no ledger, audit or transaction row.

type User = Awaited<ReturnType<typeof quickUser>>;
type Body = Record<string, unknown>;

describe('guardrails: replaying a draft against recent transactions (shared mesh, anvil)', () => {
  let mesh: Mesh;
  let chain: JsonRpcProvider;
  let owner: User;
  let agent: AnvilAgent;
  const sent: string[] = [];

  const replay = (body: Body, token = owner.token, agentId = agent.id) =>
    api(mesh, 'POST', `/v1/agents/${agentId}/guardrails/replay`, { token, body });

  /** What the replay must leave alone. */
  const footprint = async () => {
    const [row] = await sqlOn<{ ledger: string; reservations: string; txs: string; audit: string }>(
      mesh,
      `SELECT (SELECT count(*) FROM signer.guardrail_ledger WHERE agent_id = $1) AS ledger,
              (SELECT coalesce(sum(tx_count), 0) FROM signer.guardrail_ledger WHERE agent_id = $1) AS reservations,
              (SELECT count(*) FROM signer.transactions WHERE agent_id = $1) AS txs,
              -- What a replay could write if it wrote: a shadow record or a refusal (other records of
              -- the org, such as agents and keys made meanwhile, arrive on their own time).
              (SELECT count(*) FROM audit.events WHERE org_id = $2
                 AND (action LIKE 'guardrail_shadow.%' OR action LIKE '%.refused')) AS audit`,
      [agent.id, owner.orgId],
    );
    return row;
  };

  beforeAll(async () => {
    mesh = await sharedMesh();
    chain = anvilOf(mesh);
    owner = await quickUser(mesh);
    agent = await anvilAgent(mesh, owner);
    await chain.send('anvil_setBalance', [agent.address, `0x${(10n * ETH).toString(16)}`]);
    // No guardrails today: all three go through.
    for (const value of ['0.5', '2.0', '0.3']) {
      const r = await submitTx(mesh, agent, { chain: 'anvil', to: randomAddress(), value });
      expect(r.status).toBe(201);
      sent.push(r.body['id'] as string);
      await settledTx(mesh, agent, r.body['id'] as string);
    }
  }, 90_000);
  afterAll(() => {
    chain?.destroy();
    return mesh?.stop();
  });

  it('names the transaction a per-transaction limit would have denied, and why', async () => {
    const r = await replay({ days: 1, draft_guardrails: { tx_max_value_eth: '1' } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      agent_id: agent.id,
      enforcement: 'log',
      transactions_evaluated: 3,
      truncated: false,
      would_deny_count: 1,
      by_reason_code: { tx_max_value_exceeded: 1 },
      would_deny: [
        {
          transaction_id: sent[1],
          chain: 'anvil',
          value: String(2n * ETH),
          violations: [
            { reason_code: 'tx_max_value_exceeded', field: 'tx_max_value', detail: expect.any(String) },
          ],
        },
      ],
    });
  });

  it('keeps the day’s total as the draft would have: enforce does not count a denied one, log does', async () => {
    const daily = { tx_daily_limit_eth: '1' };
    const enforce = await replay({
      draft_guardrails: { ...daily, execution_guardrails: { enforcement: 'enforce' } },
    });
    expect(enforce.body).toMatchObject({ enforcement: 'enforce', would_deny_count: 1 });
    expect((enforce.body['would_deny'] as Body[]).map((d) => d['transaction_id'])).toEqual([sent[1]]);
    const log = await replay({ draft_guardrails: daily });
    expect((log.body['would_deny'] as Body[]).map((d) => d['transaction_id'])).toEqual([sent[1], sent[2]]);
    // Without a draft the agent's own (empty) guardrails deny nothing.
    expect((await replay({})).body).toMatchObject({ transactions_evaluated: 3, would_deny_count: 0 });
  });

  it("shows the day's spend on the agent record by chain family, as the guardrails counted it", async () => {
    const one = await api(mesh, 'GET', `/v1/agents/${agent.id}`, { token: owner.token });
    expect(one.body).toMatchObject({ tx_spent_today_by_chain: { evm: '2.8' }, tx_count_today: 3 });
    const list = await api(mesh, 'GET', '/v1/agents', { token: owner.token });
    expect((list.body['agents'] as Body[]).find((a) => a['id'] === agent.id)).toMatchObject({
      tx_spent_today_by_chain: { evm: '2.8' },
      tx_count_today: 3,
    });
    // The agent reads its own.
    expect((await api(mesh, 'GET', `/v1/agents/${agent.id}`, { token: agent.token })).body).toMatchObject({
      tx_count_today: 3,
    });
    // An agent that sent nothing today shows an empty day.
    const idle = await anvilAgent(mesh, owner);
    expect((await api(mesh, 'GET', `/v1/agents/${idle.id}`, { token: owner.token })).body).toMatchObject({
      tx_spent_today_by_chain: {},
      tx_count_today: 0,
    });
  });

  it('writes nothing: no ledger, reservation, transaction or audit record', async () => {
    const before = await footprint();
    await replay({ draft_guardrails: { tx_max_value_eth: '0.1', tx_to_allowlist: [randomAddress()] } });
    await replay({ days: 90, draft_guardrails: { tx_allowed_chains: ['base'] } });
    expect(await footprint()).toEqual(before);
  });

  it('refuses members and agents (403), bad fields (400 naming them), another org’s agent (404)', async () => {
    const member = await invitedMember(mesh, owner, 'member');
    expectProblem(await replay({}, member.token), 403);
    expectProblem(await replay({}, agent.token), 403);
    for (const [body, field] of [
      [{ days: 0 }, 'days'],
      [{ days: 91 }, 'days'],
      [{ draft_guardrails: { tx_max_value_eth: 'lots' } }, 'draft_guardrails.tx_max_value_eth'],
      [{ draft_guardrails: { name: 'not a guardrail' } }, 'draft_guardrails'],
      [{ since: 'yesterday' }, 'since'],
    ] as Array<[Body, string]>) {
      const r = await replay(body);
      expectProblem(r, 400);
      expect(String(r.body['field'] ?? '')).toContain(field);
    }
    const stranger = await quickUser(mesh);
    expectProblem(await replay({}, stranger.token), 404);
    expectProblem(await replay({}, owner.token, '00000000-0000-4000-8000-000000000000'), 404);
  });
});
