import type { JsonRpcProvider } from 'ethers';
import { TEST_PASSWORD, api, expectProblem, quickUser } from '../src/api';
import {
  ETH,
  anvilAgent,
  anvilOf,
  decide,
  getApproval,
  randomAddress,
  settledTx,
  submitTx,
} from '../src/approvals';
import { type Mesh, sharedMesh } from '../src/mesh';

// Issue 20, "over the limit → a human, not only a wall": with execution_guardrails.enforcement
// `approve`, a transaction that breaks a guardrail waits for a human (202, the violated guardrail
// in the approval's rule) instead of being refused; once approved it is resumed and sent once.

type User = Awaited<ReturnType<typeof quickUser>>;

describe('guardrails in approve mode (shared mesh, anvil)', () => {
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

  it('holds a transaction over tx_max_value for a human, with the violation shown, and sends it once approved', async () => {
    const agent = await anvilAgent(mesh, owner, {
      execution_guardrails: { enforcement: 'approve' },
      tx_max_value_eth: '0.1',
    });
    await chain.send('anvil_setBalance', [agent.address, `0x${(10n * ETH).toString(16)}`]);
    // Within the guardrails: straight through.
    const small = await submitTx(mesh, agent, { chain: 'anvil', to: randomAddress(), value: '0.05' });
    expect(small.status).toBe(201);
    await settledTx(mesh, agent, small.body['id'] as string);

    const to = randomAddress();
    const body = { chain: 'anvil', to, value: '0.5' };
    const held = await submitTx(mesh, agent, body);
    expect({ status: held.status, body: held.body }).toMatchObject({
      status: 202,
      body: { status: 'awaiting_approval', approval_id: expect.any(String) },
    });
    const approvalId = held.body['approval_id'] as string;
    const approval = await getApproval(mesh, owner.token, approvalId);
    expect(approval.body).toMatchObject({
      status: 'pending',
      risk_tier: 2,
      rule: { reason: 'guardrail_violation', violations: [{ reason_code: 'tx_max_value_exceeded' }] },
    });
    // Not approved yet: the resume is refused; nothing reaches the chain.
    expectProblem(await submitTx(mesh, agent, { ...body, resume_tx_id: held.body['id'] }), 403, {
      type: 'approval_required',
    });
    expect(await chain.getBalance(to)).toBe(0n);
    expect((await decide(mesh, owner.token, approvalId, 'approve', TEST_PASSWORD)).status).toBe(200);
    const resumed = await submitTx(mesh, agent, { ...body, resume_tx_id: held.body['id'] });
    expect(resumed.status).toBe(201);
    await settledTx(mesh, agent, held.body['id'] as string);
    expect(await chain.getBalance(to)).toBe(ETH / 2n);
    // The approval is used: a second resume is refused.
    expectProblem(await submitTx(mesh, agent, { ...body, resume_tx_id: held.body['id'] }), 403, {
      type: 'approval_required',
    });
  });

  it('is accepted on the agent record and shown; an unknown mode is 400 naming the field', async () => {
    const agent = await anvilAgent(mesh, owner, { execution_guardrails: { enforcement: 'approve' } });
    const got = await api(mesh, 'GET', `/v1/agents/${agent.id}`, { token: owner.token });
    expect(got.body).toMatchObject({ execution_guardrails: { enforcement: 'approve' } });
    const bad = await api(mesh, 'PATCH', `/v1/agents/${agent.id}`, {
      token: owner.token,
      confirm: TEST_PASSWORD,
      body: { execution_guardrails: { enforcement: 'ask' } },
    });
    expectProblem(bad, 400, { field: 'execution_guardrails.enforcement' });
  });
});
