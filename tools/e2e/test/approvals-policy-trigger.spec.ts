import { randomBytes } from 'node:crypto';
import type { JsonRpcProvider } from 'ethers';
import { TEST_PASSWORD, api, countStatuses, expectProblem, quickUser } from '../src/api';
import {
  type AnvilAgent,
  ETH,
  anvilAgent,
  anvilOf,
  decide,
  execute,
  getApproval,
  randomAddress,
  settledNonce,
  settledTx,
  submitTx,
} from '../src/approvals';
import { sqlOn } from '../src/db';
import { invitedMember } from '../src/members';
import { type Mesh, sharedMesh } from '../src/mesh';

// Issue 19 and DECISIONS.md: a vault policy created with the reference's `consensus_trigger`
// (principal an agent) is the same kind of rule as one of the agent's action_approval_policy. The
// agent's transactions matching it wait for the consensus; clearing it lets them through; it never
// applies to another agent. Against the shared mesh and its anvil.

type User = Awaited<ReturnType<typeof quickUser>>;
type Body = Record<string, unknown>;

/** Above a tenth of an ETH, two admins must agree. */
const TRIGGER = {
  conditions: [{ type: 'value_above', threshold_wei: String(ETH / 10n) }],
  approval: { min_approvals: 2, required_roles: ['admin'] },
};

describe('approvals: a vault policy’s consensus_trigger (shared mesh, anvil)', () => {
  let mesh: Mesh;
  let chain: JsonRpcProvider;
  let owner: User;
  let admin1: User;
  let admin2: User;
  let agent: AnvilAgent;
  let other: AnvilAgent;
  let vaultId: string;

  const fund = (address: string) =>
    chain.send('anvil_setBalance', [address, `0x${(100n * ETH).toString(16)}`]);
  const policies = (path = '') => `/v1/vaults/${vaultId}/policies${path}`;
  const createPolicy = (body: Body, token = owner.token, confirm: string | null = TEST_PASSWORD) =>
    api(mesh, 'POST', policies(), { token, body, ...(confirm !== null ? { confirm } : {}) });
  const grantOf = (a: AnvilAgent, extra: Body = {}) => ({
    secret_path_pattern: 'pay/**',
    principal_type: 'agent',
    principal_id: a.id,
    permissions: ['read'],
    ...extra,
  });

  beforeAll(async () => {
    mesh = await sharedMesh();
    chain = anvilOf(mesh);
    owner = await quickUser(mesh);
    admin1 = await invitedMember(mesh, owner, 'admin');
    admin2 = await invitedMember(mesh, owner, 'admin');
    agent = await anvilAgent(mesh, owner);
    other = await anvilAgent(mesh, owner);
    await fund(agent.address);
    await fund(other.address);
    const v = await api(mesh, 'POST', '/v1/vaults', {
      token: owner.token,
      body: { name: `trigger-${randomBytes(4).toString('hex')}` },
    });
    expect(v.status).toBe(201);
    vaultId = v.body['id'] as string;
  }, 90_000);
  afterAll(() => {
    chain?.destroy();
    return mesh?.stop();
  });

  it('refuses a trigger on a user grant, an unsupported deep_inspect and a malformed rule, storing nothing', async () => {
    const cases: Array<[Body, string]> = [
      [
        {
          secret_path_pattern: 'pay/**',
          principal_type: 'user',
          principal_id: owner.userId,
          permissions: ['read'],
          consensus_trigger: TRIGGER,
        },
        'consensus_trigger',
      ],
      [
        grantOf(agent, { consensus_trigger: { ...TRIGGER, deep_inspect: true } }),
        'consensus_trigger.deep_inspect',
      ],
      [
        grantOf(agent, { consensus_trigger: { conditions: TRIGGER.conditions } }),
        'consensus_trigger.approval',
      ],
      [
        grantOf(agent, { consensus_trigger: { ...TRIGGER, approval: { min_approvals: 0 } } }),
        'consensus_trigger.approval.min_approvals',
      ],
      [grantOf(agent, { consensus_trigger: { ...TRIGGER, conditions: [] } }), 'consensus_trigger.conditions'],
      [
        grantOf(agent, {
          consensus_trigger: { ...TRIGGER, conditions: [{ type: 'action_in', actions: ['payments.send'] }] },
        }),
        'consensus_trigger.conditions',
      ],
      [
        grantOf(agent, { consensus_trigger: { ...TRIGGER, conditions: [{ type: 'sometimes' }] } }),
        'consensus_trigger.conditions[0].type',
      ],
    ];
    for (const [body, field] of cases) {
      expectProblem(await createPolicy(body), 400, { field });
    }
    expect((await api(mesh, 'GET', policies(), { token: owner.token })).body['policies']).toEqual([]);
    const [row] = await sqlOn<{ n: string }>(
      mesh,
      'SELECT count(*) AS n FROM policy.grants WHERE vault_id = $1',
      [vaultId],
    );
    expect(row!.n).toBe('0');
  });

  let policyId: string;

  it('is for owners and admins with a step-up: without one 401, a member on a vault of their own 403', async () => {
    const body = grantOf(agent, { consensus_trigger: TRIGGER });
    expectProblem(await createPolicy(body, owner.token, null), 401, { type: 'step_up_required' });
    expectProblem(await createPolicy(body, owner.token, 'wrong-password'), 403, { type: 'step_up_required' });
    const member = await invitedMember(mesh, owner, 'member');
    const own = await api(mesh, 'POST', '/v1/vaults', {
      token: member.token,
      body: { name: `member-${randomBytes(4).toString('hex')}` },
    });
    expect(own.status).toBe(201);
    const r = await api(mesh, 'POST', `/v1/vaults/${own.body['id'] as string}/policies`, {
      token: member.token,
      confirm: TEST_PASSWORD,
      body,
    });
    expectProblem(r, 403);
    // The member still manages plain grants of the vault it created.
    const plain = await api(mesh, 'POST', `/v1/vaults/${own.body['id'] as string}/policies`, {
      token: member.token,
      body: grantOf(agent),
    });
    expect(plain.status).toBe(201);
    expect((await api(mesh, 'GET', policies(), { token: owner.token })).body['policies']).toEqual([]);
  });

  it("stores the trigger on the agent's grant and shows it as an approval rule of tier 1", async () => {
    const r = await createPolicy(grantOf(agent, { consensus_trigger: { ...TRIGGER, deep_inspect: false } }));
    expect(r.status).toBe(201);
    policyId = r.body['id'] as string;
    expect(r.body['consensus_trigger']).toEqual({ ...TRIGGER, risk_tier: 1 });
    const listed = await api(mesh, 'GET', policies(), { token: owner.token });
    expect(listed.body['policies']).toEqual([
      expect.objectContaining({ id: policyId, consensus_trigger: { ...TRIGGER, risk_tier: 1 } }),
    ]);
  });

  it('holds the agent’s matching transaction for two admins, then signs it once; below the threshold it goes through', async () => {
    const small = await submitTx(mesh, agent, { chain: 'anvil', to: randomAddress(), value: '0.05' });
    expect(small.status).toBe(201);
    await settledTx(mesh, agent, small.body['id'] as string);

    const to = randomAddress();
    const body = { chain: 'anvil', to, value: '0.5' };
    const nonce0 = await settledNonce(chain, agent.address);
    const held = await submitTx(mesh, agent, body);
    expect({ status: held.status, body: held.body }).toMatchObject({
      status: 202,
      body: { status: 'awaiting_approval', approval_id: expect.any(String) },
    });
    const txId = held.body['id'] as string;
    const approvalId = held.body['approval_id'] as string;
    expect((await getApproval(mesh, owner.token, approvalId)).body).toMatchObject({
      status: 'pending',
      kind: 'consensus',
      risk_tier: 1,
      requirement: { min_approvals: 2, required_roles: ['admin'], self_approval_allowed: false },
    });
    // Not yet approved: the resume is refused and nothing reaches the chain.
    expectProblem(await submitTx(mesh, agent, { ...body, resume_tx_id: txId }), 403, {
      type: 'approval_required',
    });
    expect((await decide(mesh, admin1.token, approvalId, 'approve')).status).toBe(200);
    expect((await decide(mesh, admin2.token, approvalId, 'approve')).body).toMatchObject({
      status: 'approved',
    });
    expect((await execute(mesh, admin1.token, approvalId)).body).toMatchObject({ status: 'executed' });
    expect(await settledNonce(chain, agent.address)).toBe(nonce0);

    // Two resumes at once: the approval is used exactly once.
    const resumes = await Promise.all(
      [1, 2, 3].map(() => submitTx(mesh, agent, { ...body, resume_tx_id: txId })),
    );
    expect(countStatuses(resumes)).toEqual({ 201: 1, 403: 2 });
    await settledTx(mesh, agent, txId);
    expect(await chain.getBalance(to)).toBe(ETH / 2n);
    expect(await settledNonce(chain, agent.address)).toBe(nonce0 + 1);
  });

  it('never applies to another agent of the org', async () => {
    const to = randomAddress();
    const r = await submitTx(mesh, other, { chain: 'anvil', to, value: '0.5' });
    expect(r.status).toBe(201);
    await settledTx(mesh, other, r.body['id'] as string);
    expect(await chain.getBalance(to)).toBe(ETH / 2n);
  });

  it('stops applying once the trigger is cleared with null, and applies again once set', async () => {
    // Clearing it is a change of who must agree: the step-up too.
    expectProblem(
      await api(mesh, 'PUT', policies(`/${policyId}`), {
        token: owner.token,
        body: { consensus_trigger: null },
      }),
      401,
    );
    const cleared = await api(mesh, 'PUT', policies(`/${policyId}`), {
      token: owner.token,
      confirm: TEST_PASSWORD,
      body: { consensus_trigger: null },
    });
    expect(cleared.status).toBe(200);
    expect(cleared.body['consensus_trigger']).toBeNull();
    const free = await submitTx(mesh, agent, { chain: 'anvil', to: randomAddress(), value: '0.5' });
    expect(free.status).toBe(201);
    await settledTx(mesh, agent, free.body['id'] as string);

    const set = await api(mesh, 'PUT', policies(`/${policyId}`), {
      token: owner.token,
      confirm: TEST_PASSWORD,
      body: { consensus_trigger: TRIGGER },
    });
    expect(set.status).toBe(200);
    expect((await submitTx(mesh, agent, { chain: 'anvil', to: randomAddress(), value: '0.5' })).status).toBe(
      202,
    );
  });

  it('removing a grant that carries a trigger needs the step-up as well', async () => {
    expectProblem(await api(mesh, 'DELETE', policies(`/${policyId}`), { token: owner.token }), 401);
    const gone = await api(mesh, 'DELETE', policies(`/${policyId}`), {
      token: owner.token,
      confirm: TEST_PASSWORD,
    });
    expect(gone.status).toBe(204);
    const free = await submitTx(mesh, agent, { chain: 'anvil', to: randomAddress(), value: '0.5' });
    expect(free.status).toBe(201);
    await settledTx(mesh, agent, free.body['id'] as string);
  });
});
