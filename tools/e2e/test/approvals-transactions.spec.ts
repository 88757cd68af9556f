import { createHash, randomUUID } from 'node:crypto';
import { Interface, type JsonRpcProvider, MaxUint256, hexlify, toUtf8Bytes, verifyMessage } from 'ethers';
import { canonicalJson } from '@custos/service-kit';
import { TEST_PASSWORD as PASSWORD, api, expectProblem, quickUser } from '../src/api';
import {
  type AnvilAgent,
  ETH,
  type Reply,
  type TotpUser,
  anvilAgent,
  anvilOf,
  auditRecords,
  decide,
  enrolTotp,
  execute,
  getApproval,
  postJson,
  randomAddress,
  reauthToken,
  settledNonce,
  settledTx,
  submitTx,
} from '../src/approvals';
import { invitedMember } from '../src/members';
import { type Mesh, sharedMail, sharedMesh } from '../src/mesh';

// Issue 19: transactions and sign intents that need a human (the agent's action_approval_policy),
// decided with the right proof of presence, resumed once and only once; consensus 2-of-3 admins;
// the approver's preview. Against the shared mesh and its anvil.

type User = Awaited<ReturnType<typeof quickUser>>;
type Body = Record<string, unknown>;

const ERC20 = new Interface([
  'function transfer(address to, uint256 amount) returns (bool)',
  'function approve(address spender, uint256 amount) returns (bool)',
]);
// Whoever receives a consensus-gated payment.
const CONSENSUS_TO = randomAddress();

/** The policy of the spec's agents: tiers by value, consensus by destination, tier 1 by ERC-20 selector. */
const POLICY = {
  rules: [
    { conditions: [{ type: 'value_above', threshold_wei: String(ETH) }], risk_tier: 2 },
    { conditions: [{ type: 'value_above', threshold_wei: String(5n * ETH) }], risk_tier: 3 },
    {
      conditions: [{ type: 'to_address_in', addresses: [CONSENSUS_TO.toLowerCase()] }],
      risk_tier: 1,
      approval: { min_approvals: 2, required_roles: ['admin'] },
    },
    {
      conditions: [{ type: 'function_selector_in', selectors: ['0xA9059CBB', '0x095ea7b3'] }],
      risk_tier: 1,
    },
  ],
};

const expectApprovalRequired = (r: Reply | Awaited<ReturnType<typeof api>>, approvalId?: string) => {
  if (r.status !== 403)
    throw new Error(`expected 403 approval_required, got ${r.status}: ${JSON.stringify(r.body)}`);
  expect(r.body).toMatchObject({
    status: 403,
    type: 'approval_required',
    ...(approvalId ? { approval_request_id: approvalId } : {}),
  });
};

describe('approvals: transactions and sign intents that need a human (shared mesh, anvil)', () => {
  let mesh: Mesh;
  let chain: JsonRpcProvider;
  let owner: User;
  let admin1: User;
  let admin2: User;
  let member: User;
  let stranger: User;
  let admin1Totp: TotpUser;
  let agent: AnvilAgent;
  let other: AnvilAgent;

  const fund = (address: string, wei = 1000n * ETH) =>
    chain.send('anvil_setBalance', [address, `0x${wei.toString(16)}`]);
  const balance = (address: string) => chain.getBalance(address);

  /** Submits a transaction that must wait for a human; returns the held transaction and its approval id. */
  async function held(a: AnvilAgent, body: Body): Promise<{ tx: Body; approvalId: string }> {
    const r = await submitTx(mesh, a, body);
    if (r.status !== 202) throw new Error(`expected 202 awaiting_approval, got ${r.status}: ${r.text}`);
    expect(r.body).toMatchObject({ status: 'awaiting_approval', approval_id: expect.any(String) });
    return { tx: r.body, approvalId: r.body['approval_id'] as string };
  }

  beforeAll(async () => {
    mesh = await sharedMesh();
    chain = anvilOf(mesh);
    owner = await quickUser(mesh);
    admin1 = await invitedMember(mesh, owner, 'admin');
    admin2 = await invitedMember(mesh, owner, 'admin');
    member = await invitedMember(mesh, owner, 'member');
    stranger = await quickUser(mesh);
    admin1Totp = await enrolTotp(mesh, admin1);
    agent = await anvilAgent(mesh, owner, { action_approval_policy: POLICY });
    other = await anvilAgent(mesh, owner, { action_approval_policy: POLICY });
    await fund(agent.address);
    await fund(other.address);
  }, 90_000);
  afterAll(() => {
    chain?.destroy();
    return mesh?.stop();
  });

  describe('one human, tier 2', () => {
    const to = randomAddress();
    const body = {
      chain: 'anvil',
      to,
      value: '2.0', // a fractional part: ETH (an integer string is wei)
      summary: { title: 'Pay the supplier', fields: [{ label: 'Recipient', value: to }] },
    };
    let txId: string;
    let approvalId: string;
    let nonce0: number;

    it('over the threshold: 202 awaiting_approval with an approval id, nothing reaches the chain', async () => {
      nonce0 = await settledNonce(chain, agent.address);
      const h = await held(agent, body);
      txId = h.tx['id'] as string;
      approvalId = h.approvalId;
      expect(h.tx).toMatchObject({ agent_id: agent.id, chain: 'anvil', status: 'awaiting_approval' });
      expect(h.tx['tx_hash'] ?? null).toBeNull();
      expect(h.tx['signed_tx'] ?? null).toBeNull();
      expect(await settledNonce(chain, agent.address)).toBe(nonce0);
      expect(await balance(to)).toBe(0n);
      const got = await api(mesh, 'GET', `/v1/agents/${agent.id}/transactions/${txId}`, {
        token: agent.token,
      });
      expect(got.body).toMatchObject({ id: txId, status: 'awaiting_approval', approval_id: approvalId });
    });

    it('the approval is pending, tier 2, with a preview of what would be sent and the rule that asked', async () => {
      const r = await getApproval(mesh, owner.token, approvalId);
      expect({ status: r.status, body: r.body }).toMatchObject({
        status: 200,
        body: {
          id: approvalId,
          approval_id: approvalId,
          org_id: owner.orgId,
          agent_id: agent.id,
          user_id: owner.userId,
          action: 'agent_transaction',
          target_type: 'transaction',
          target_id: txId,
          status: 'pending',
          kind: 'single',
          risk_tier: 2,
          enforced_risk_tier: 2,
          approvals_count: 0,
          summary: { title: 'Pay the supplier' },
          decided_by: null,
          consumed_at: null,
        },
      });
      const preview = r.body['preview'] as Body;
      expect(String(preview['to']).toLowerCase()).toBe(to.toLowerCase());
      expect(preview).toMatchObject({ chain: 'anvil', value_wei: String(2n * ETH) });
      expect(Number(preview['value'])).toBe(2);
      expect(String(preview['from']).toLowerCase()).toBe(agent.address.toLowerCase());
      // The deciding rule, as the policy states it.
      expect(r.body['rule']).toMatchObject({ risk_tier: 2, conditions: [{ type: 'value_above' }] });
      expect(preview['rule']).toMatchObject({ risk_tier: 2 });
      // Simulated on anvil (eth_call, and debug_traceCall's balance changes): the recipient gains 2 ETH.
      const sim = preview['simulation'] as Body;
      expect(sim).toMatchObject({ ok: true, trace: 'debug_traceCall' });
      const gain = (sim['balance_changes'] as Body[]).find(
        (c) => String(c['address']).toLowerCase() === to.toLowerCase(),
      );
      expect(gain).toMatchObject({ delta_wei: String(2n * ETH) });
      // The list leaves the preview (and payload) out: null in its items; GET one has it.
      const listed = await api(mesh, 'GET', `/v1/approvals?agent_id=${agent.id}&limit=500`, {
        token: owner.token,
      });
      expect(listed.status).toBe(200);
      const item = (listed.body['approvals'] as Body[]).find((x) => x['id'] === approvalId);
      expect(item).toMatchObject({ id: approvalId, status: 'pending', payload: null, preview: null });
      expect(preview).toEqual(expect.objectContaining({ chain: 'anvil' }));
      // The agent it concerns may read it; another org may not know it exists.
      expect((await getApproval(mesh, agent.token, approvalId)).status).toBe(200);
      expectProblem(await getApproval(mesh, stranger.token, approvalId), 404);
    });

    it('tier 2 without X-Auth-Confirm is challenged (401), a wrong password refused (403), and it stays pending', async () => {
      const none = await decide(mesh, owner.token, approvalId, 'approve');
      expectProblem(none, 401, { type: 'step_up_required', purpose: 'approval.decide' });
      expect(none.body['accepted']).toEqual(['reauth_token', 'password', 'totp']);
      const wrong = await decide(mesh, owner.token, approvalId, 'approve', `${PASSWORD}x`);
      expectProblem(wrong, 403, { type: 'step_up_required' });
      // An agent never decides, with or without a credential.
      expectProblem(await decide(mesh, agent.token, approvalId, 'approve', PASSWORD), 403);
      // Another org's human does not see it.
      expectProblem(await decide(mesh, stranger.token, approvalId, 'approve', PASSWORD), 404);
      expect((await getApproval(mesh, owner.token, approvalId)).body).toMatchObject({
        status: 'pending',
        decided_by: null,
      });
      // An unknown decision names the field.
      expectProblem(await decide(mesh, owner.token, approvalId, 'maybe', PASSWORD), 400, {
        field: 'decision',
      });
      // A resume before the decision is refused and changes nothing.
      expectApprovalRequired(await submitTx(mesh, agent, { ...body, resume_tx_id: txId }), approvalId);
      expect(await settledNonce(chain, agent.address)).toBe(nonce0);
    });

    it('with the password: 200 approved, carrying approval_id and the credential used', async () => {
      const r = await decide(mesh, owner.token, approvalId, 'approved', PASSWORD, 'known supplier');
      expect({ status: r.status, body: r.body }).toMatchObject({
        status: 200,
        body: {
          approval_id: approvalId,
          status: 'approved',
          decided_by: owner.userId,
          credential_type: 'password',
          decision_reason: 'known supplier',
          decided_at: expect.any(String),
        },
      });
      // Decided is final.
      expectProblem(await decide(mesh, owner.token, approvalId, 'reject', PASSWORD), 409);
    });

    it('the resume broadcasts the same transaction once and it mines; a second resume is 403 and sends nothing', async () => {
      const r = await submitTx(mesh, agent, { ...body, resume_tx_id: txId });
      expect({ status: r.status, body: r.body }).toMatchObject({
        status: 201,
        body: { id: txId, approval_id: approvalId, status: 'broadcast', nonce: nonce0 },
      });
      const done = await settledTx(mesh, agent, txId);
      expect(done).toMatchObject({ status: 'confirmed', tx_hash: r.body['tx_hash'] });
      expect(await balance(to)).toBe(2n * ETH);
      expect(await settledNonce(chain, agent.address)).toBe(nonce0 + 1);

      const again = await submitTx(mesh, agent, { ...body, resume_tx_id: txId });
      expectApprovalRequired(again, approvalId);
      expect(await settledNonce(chain, agent.address)).toBe(nonce0 + 1);
      expect(await balance(to)).toBe(2n * ETH);
      const a = await getApproval(mesh, owner.token, approvalId);
      expect(a.body['consumed_at']).toEqual(expect.any(String));
    });

    it('audits the request, the decision with its credential type, and the consumption', async () => {
      const about = (e: Body) => JSON.stringify(e).includes(approvalId);
      await auditRecords(mesh, owner.token, 'approval.requested', about);
      const decided = await auditRecords(mesh, owner.token, 'approval.decided', about);
      expect(decided[0]).toMatchObject({
        actor_type: 'user',
        actor_id: owner.userId,
        details: { decision: 'approved', credential_type: 'password', risk_tier: 2 },
      });
      const consumed = await auditRecords(mesh, owner.token, 'approval.consumed', about);
      expect(JSON.stringify(consumed[0])).toContain(txId);
      await auditRecords(mesh, owner.token, 'agent.transaction.awaiting_approval', (e) =>
        JSON.stringify(e).includes(txId),
      );
    });
  });

  it('a rat_ for approval.decide approves tier 2; an Idempotency-Key on the resume answers the first result', async () => {
    const to = randomAddress();
    const body = { chain: 'anvil', to, value: '1.25' };
    const { tx, approvalId } = await held(agent, body);
    // A rat_ made for another purpose is no proof for this one.
    const otherRat = await reauthToken(mesh, owner.token, 'account.api_key.create');
    expectProblem(await decide(mesh, owner.token, approvalId, 'approve', otherRat), 403, {
      type: 'step_up_required',
    });
    const rat = await reauthToken(mesh, owner.token, 'approval.decide');
    const ok = await decide(mesh, owner.token, approvalId, 'approve', rat);
    expect({ status: ok.status, body: ok.body }).toMatchObject({
      status: 200,
      body: { status: 'approved', credential_type: 'reauth_token' },
    });
    const key = randomUUID();
    const nonce0 = await settledNonce(chain, agent.address);
    const first = await submitTx(mesh, agent, { ...body, resume_tx_id: tx['id'] }, key);
    expect(first.status).toBe(201);
    const replay = await submitTx(mesh, agent, { ...body, resume_tx_id: tx['id'] }, key);
    // A repeat answers the same transaction (200, as any Idempotency-Key repeat), not a 403.
    expect({ status: replay.status, id: replay.body['id'], hash: replay.body['tx_hash'] }).toEqual({
      status: 200,
      id: tx['id'],
      hash: first.body['tx_hash'],
    });
    await settledTx(mesh, agent, tx['id'] as string);
    expect(await balance(to)).toBe((125n * ETH) / 100n);
    expect(await settledNonce(chain, agent.address)).toBe(nonce0 + 1);
  });

  it('50 parallel resumes of one approved transaction: exactly one 201, the rest 403, one transaction on the chain', async () => {
    const to = randomAddress();
    const body = { chain: 'anvil', to, value: '1.5' };
    const { tx, approvalId } = await held(agent, body);
    expect((await decide(mesh, owner.token, approvalId, 'approve', PASSWORD)).status).toBe(200);
    const nonce0 = await settledNonce(chain, agent.address);
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => submitTx(mesh, agent, { ...body, resume_tx_id: tx['id'] })),
    );
    const byStatus = answers.reduce<Record<number, number>>(
      (m, r) => ({ ...m, [r.status]: (m[r.status] ?? 0) + 1 }),
      {},
    );
    expect(byStatus).toEqual({ 201: 1, 403: 49 });
    for (const r of answers.filter((x) => x.status === 403)) expectApprovalRequired(r);
    await settledTx(mesh, agent, tx['id'] as string);
    expect(await settledNonce(chain, agent.address)).toBe(nonce0 + 1);
    expect(await balance(to)).toBe((15n * ETH) / 10n);
  });

  it("a resume naming another agent's transaction, another body or an unknown transaction is 403 and changes nothing", async () => {
    const to = randomAddress();
    const body = { chain: 'anvil', to, value: '3.0' };
    const { tx, approvalId } = await held(agent, body);
    expect((await decide(mesh, owner.token, approvalId, 'approve', PASSWORD)).status).toBe(200);
    const nonceA = await settledNonce(chain, agent.address);
    const nonceB = await settledNonce(chain, other.address);

    // Another agent is not told which approval holds the row (it is named to the row's own agent only).
    const byOther = await submitTx(mesh, other, { ...body, resume_tx_id: tx['id'] });
    expectApprovalRequired(byOther);
    expect(byOther.body).not.toHaveProperty('approval_request_id');
    expect(byOther.text).not.toContain(approvalId);
    expectApprovalRequired(
      await submitTx(mesh, agent, { ...body, value: '3.5', resume_tx_id: tx['id'] }),
      approvalId,
    );
    expectApprovalRequired(
      await submitTx(mesh, agent, { ...body, to: randomAddress(), resume_tx_id: tx['id'] }),
      approvalId,
    );
    expectApprovalRequired(await submitTx(mesh, agent, { ...body, resume_tx_id: randomUUID() }));

    expect(await settledNonce(chain, agent.address)).toBe(nonceA);
    expect(await settledNonce(chain, other.address)).toBe(nonceB);
    expect(await balance(to)).toBe(0n);
    expect((await getApproval(mesh, owner.token, approvalId)).body).toMatchObject({
      status: 'approved',
      consumed_at: null,
    });
    const still = await api(mesh, 'GET', `/v1/agents/${agent.id}/transactions/${String(tx['id'])}`, {
      token: agent.token,
    });
    expect(still.body['status']).toBe('awaiting_approval');
    // Nothing was spent by the refusals: the right resume still goes through.
    const ok = await submitTx(mesh, agent, { ...body, resume_tx_id: tx['id'] });
    expect(ok.status).toBe(201);
    await settledTx(mesh, agent, tx['id'] as string);
    expect(await balance(to)).toBe(3n * ETH);
  });

  it('a rejected approval cannot be resumed', async () => {
    const to = randomAddress();
    const body = { chain: 'anvil', to, value: '2.5' };
    const { tx, approvalId } = await held(agent, body);
    const r = await decide(mesh, owner.token, approvalId, 'denied', PASSWORD, 'not ours');
    expect({ status: r.status, body: r.body }).toMatchObject({
      status: 200,
      body: { status: 'rejected', decision_reason: 'not ours', decided_by: owner.userId },
    });
    expectProblem(await decide(mesh, owner.token, approvalId, 'approve', PASSWORD), 409);
    const nonce0 = await settledNonce(chain, agent.address);
    expectApprovalRequired(await submitTx(mesh, agent, { ...body, resume_tx_id: tx['id'] }), approvalId);
    expect(await settledNonce(chain, agent.address)).toBe(nonce0);
    expect(await balance(to)).toBe(0n);
    expect((await getApproval(mesh, agent.token, approvalId)).body['status']).toBe('rejected');
  });

  it('tier 3 needs TOTP: a password or a rat_ is refused (403), a TOTP code of an enrolled human approves', async () => {
    const to = randomAddress();
    const body = { chain: 'anvil', to, value: '6.0' };
    const { tx, approvalId } = await held(agent, body);
    expect((await getApproval(mesh, admin1.token, approvalId)).body).toMatchObject({
      risk_tier: 3,
      enforced_risk_tier: 3,
      rule: { risk_tier: 3 },
    });
    // The challenge names the one credential tier 3 accepts.
    const bare = await decide(mesh, admin1.token, approvalId, 'approve');
    expectProblem(bare, 401, { type: 'step_up_required', purpose: 'approval.decide' });
    expect(bare.body['accepted']).toEqual(['totp']);
    const byPassword = await decide(mesh, admin1.token, approvalId, 'approve', PASSWORD);
    expectProblem(byPassword, 403, { type: 'step_up_required' });
    expect(String(byPassword.body['detail']).toLowerCase()).toContain('totp');
    const rat = await reauthToken(mesh, admin1.token, 'approval.decide');
    const byRat = await decide(mesh, admin1.token, approvalId, 'approve', rat);
    expectProblem(byRat, 403, { type: 'step_up_required' });
    expect(String(byRat.body['detail']).toLowerCase()).toContain('totp');
    expect((await getApproval(mesh, admin1.token, approvalId)).body['status']).toBe('pending');
    const ok = await decide(mesh, admin1.token, approvalId, 'approve', await admin1Totp.code());
    expect({ status: ok.status, body: ok.body }).toMatchObject({
      status: 200,
      body: { status: 'approved', credential_type: 'totp', decided_by: admin1.userId },
    });
    const resumed = await submitTx(mesh, agent, { ...body, resume_tx_id: tx['id'] });
    expect(resumed.status).toBe(201);
    await settledTx(mesh, agent, tx['id'] as string);
    expect(await balance(to)).toBe(6n * ETH);
  });

  describe('consensus 2-of-3 with required_roles [admin]', () => {
    it('votes by admins only, once each; executed by an admin only, once; the resume goes through once', async () => {
      const nonce0 = await settledNonce(chain, agent.address);
      const balance0 = await balance(CONSENSUS_TO);
      const body = { chain: 'anvil', to: CONSENSUS_TO, value: '0.5' };
      const { tx, approvalId } = await held(agent, body);
      const txId = tx['id'] as string;
      expect((await getApproval(mesh, owner.token, approvalId)).body).toMatchObject({
        status: 'pending',
        kind: 'consensus',
        risk_tier: 1,
        approvals_count: 0,
        requirement: { min_approvals: 2, required_roles: ['admin'], self_approval_allowed: false },
      });
      // Every human of the org is told, with a link to the approval; another org's human is not.
      const smtp = sharedMail();
      for (const u of [owner, admin1, admin2, member]) {
        const mail = await smtp.waitForMessage(
          (m) => m.recipients.includes(u.email) && m.text.includes(approvalId),
          15_000,
        );
        expect(mail.text).toContain(`https://custos.test/approvals/${approvalId}`);
      }
      expect(
        smtp.messages.filter((m) => m.recipients.includes(stranger.email) && m.text.includes(approvalId)),
      ).toEqual([]);

      // A member's role is not required; the owner created the agent (no self-approval) and is no admin.
      expectProblem(await decide(mesh, member.token, approvalId, 'approve'), 403);
      expectProblem(await decide(mesh, owner.token, approvalId, 'approve'), 403);
      const first = await decide(mesh, admin1.token, approvalId, 'approve');
      expect({ status: first.status, body: first.body }).toMatchObject({
        status: 200,
        body: {
          status: 'pending',
          approvals_count: 1,
          votes: [{ user_id: admin1.userId, decision: 'approved' }],
        },
      });
      expectProblem(await decide(mesh, admin1.token, approvalId, 'approve'), 409);
      // One vote is not enough to execute or to resume.
      expectProblem(await execute(mesh, admin1.token, approvalId), 409);
      expectApprovalRequired(await submitTx(mesh, agent, { ...body, resume_tx_id: txId }), approvalId);

      const second = await decide(mesh, admin2.token, approvalId, 'approve');
      expect({ status: second.status, body: second.body }).toMatchObject({
        status: 200,
        body: { status: 'approved', approvals_count: 2 },
      });
      expect(second.body['votes']).toHaveLength(2);
      // Approved but not executed: the token that satisfies the gate is not minted yet.
      expectApprovalRequired(await submitTx(mesh, agent, { ...body, resume_tx_id: txId }), approvalId);
      expectProblem(await execute(mesh, member.token, approvalId), 403);
      expectProblem(await execute(mesh, owner.token, approvalId), 403);
      const done = await execute(mesh, admin2.token, approvalId);
      expect({ status: done.status, body: done.body }).toMatchObject({
        status: 200,
        body: {
          pending_approval_id: approvalId,
          status: 'executed',
          executed_at: expect.any(String),
          result: { approval_id: approvalId, target_type: 'transaction', target_id: txId },
        },
      });
      expectProblem(await execute(mesh, admin1.token, approvalId), 409);
      expect(await settledNonce(chain, agent.address)).toBe(nonce0);

      const resumed = await submitTx(mesh, agent, { ...body, resume_tx_id: txId });
      expect({ status: resumed.status, body: resumed.body }).toMatchObject({
        status: 201,
        body: { id: txId, approval_id: approvalId },
      });
      await settledTx(mesh, agent, txId);
      expectApprovalRequired(await submitTx(mesh, agent, { ...body, resume_tx_id: txId }), approvalId);
      expect(await settledNonce(chain, agent.address)).toBe(nonce0 + 1);
      expect((await balance(CONSENSUS_TO)) - balance0).toBe(ETH / 2n);
      expect((await getApproval(mesh, owner.token, approvalId)).body).toMatchObject({
        status: 'executed',
        consumed_at: expect.any(String),
      });
      const decided = await auditRecords(mesh, owner.token, 'approval.decided', (e) =>
        JSON.stringify(e).includes(approvalId),
      );
      expect(decided.length).toBeGreaterThanOrEqual(2);
      await auditRecords(mesh, owner.token, 'approval.executed', (e) =>
        JSON.stringify(e).includes(approvalId),
      );
    });

    it('one reject ends a consensus approval; a single approval is never executed', async () => {
      const body = { chain: 'anvil', to: CONSENSUS_TO, value: '0.25' };
      const { tx, approvalId } = await held(agent, body);
      expect((await decide(mesh, admin1.token, approvalId, 'approve')).status).toBe(200);
      const r = await decide(mesh, admin2.token, approvalId, 'reject', undefined, 'no');
      expect({ status: r.status, body: r.body }).toMatchObject({ status: 200, body: { status: 'rejected' } });
      expectProblem(await execute(mesh, admin1.token, approvalId), 409);
      expectApprovalRequired(await submitTx(mesh, agent, { ...body, resume_tx_id: tx['id'] }), approvalId);

      const single = await held(agent, { chain: 'anvil', to: randomAddress(), value: '1.1' });
      expect((await decide(mesh, owner.token, single.approvalId, 'approve', PASSWORD)).status).toBe(200);
      const ex = await execute(mesh, owner.token, single.approvalId);
      expectProblem(ex, 409);
    });
  });

  describe('the preview the approver sees', () => {
    it('decodes an ERC-20 transfer to its recipient and amount, and flags a summary naming another recipient', async () => {
      const token = randomAddress();
      const recipient = randomAddress();
      const claimed = randomAddress();
      const data = ERC20.encodeFunctionData('transfer', [recipient, 1_234_567n]);
      const { approvalId } = await held(agent, {
        chain: 'anvil',
        to: token,
        value: '0',
        data,
        summary: {
          title: 'Pay the invoice',
          body: `Sends 1.234567 USDC to ${claimed}`,
          fields: [{ label: 'Recipient', value: claimed }],
        },
      });
      const preview = (await getApproval(mesh, owner.token, approvalId)).body['preview'] as Body;
      const call = preview['call'] as Body;
      expect(call).toMatchObject({ selector: '0xa9059cbb', name: 'transfer' });
      const args = Object.values(call['args'] as Body).map((v) => String(v).toLowerCase());
      expect(args).toEqual(expect.arrayContaining([recipient.toLowerCase(), '1234567']));
      const transfer = preview['token_transfer'] as Body;
      expect(String(transfer['recipient']).toLowerCase()).toBe(recipient.toLowerCase());
      expect(transfer).toMatchObject({ amount_raw: '1234567', kind: 'erc20_transfer' });
      const flags = (preview['flags'] as Body[]).map((f) => f['code']);
      expect(flags).toContain('summary_recipient_mismatch');
      expect(flags).not.toContain('unlimited_approval');

      // A summary that names the real recipient is not flagged.
      const honest = await held(agent, {
        chain: 'anvil',
        to: token,
        value: '0',
        data,
        summary: { title: 'Pay the invoice', fields: [{ label: 'Recipient', value: recipient }] },
      });
      const honestPreview = (await getApproval(mesh, owner.token, honest.approvalId)).body['preview'] as Body;
      expect((honestPreview['flags'] as Body[]).map((f) => f['code'])).not.toContain(
        'summary_recipient_mismatch',
      );
    });

    it('flags an unlimited ERC-20 approval', async () => {
      const spender = randomAddress();
      const { approvalId } = await held(agent, {
        chain: 'anvil',
        to: randomAddress(),
        value: '0',
        data: ERC20.encodeFunctionData('approve', [spender, MaxUint256]),
      });
      const preview = (await getApproval(mesh, owner.token, approvalId)).body['preview'] as Body;
      expect(preview['call']).toMatchObject({ selector: '0x095ea7b3', name: 'approve' });
      expect((preview['flags'] as Body[]).map((f) => f['code'])).toContain('unlimited_approval');
    });
  });

  describe('the sign intent gate', () => {
    it('a personal_sign under an intent_type_in rule waits (202); after approval the same body signs once, even 20 at once', async () => {
      const signer = await anvilAgent(mesh, owner, {
        message_signing_enabled: true,
        action_approval_policy: {
          rules: [
            { conditions: [{ type: 'intent_type_in', intent_types: ['personal_sign'] }], risk_tier: 1 },
          ],
        },
      });
      const text = `approve me ${randomUUID()}`;
      const body = { intent_type: 'personal_sign', chain: 'anvil', message: hexlify(toUtf8Bytes(text)) };
      const path = `/v1/agents/${signer.id}/sign`;
      const waiting = await postJson(mesh, path, body, { token: signer.token });
      expect({ status: waiting.status, body: waiting.body }).toMatchObject({
        status: 202,
        body: { status: 'awaiting_approval', approval_id: expect.any(String), intent_type: 'personal_sign' },
      });
      expect(waiting.body['signature'] ?? null).toBeNull();
      const approvalId = waiting.body['approval_id'] as string;
      const a = await getApproval(mesh, owner.token, approvalId);
      expect(a.body).toMatchObject({
        action: 'agent_sign_intent',
        target_type: 'sign_intent',
        status: 'pending',
      });
      // Bound to the body: sha256 of its canonical JSON (approval_id left out).
      expect(a.body['target_id']).toBe(createHash('sha256').update(canonicalJson(body)).digest('hex'));
      // Not approved yet.
      expectApprovalRequired(
        await postJson(mesh, path, { ...body, approval_id: approvalId }, { token: signer.token }),
      );
      expect((await decide(mesh, owner.token, approvalId, 'approve')).status).toBe(200);
      // The approval covers this body only.
      const otherMessage = { ...body, message: hexlify(toUtf8Bytes(`${text}!`)), approval_id: approvalId };
      expectApprovalRequired(await postJson(mesh, path, otherMessage, { token: signer.token }));
      // 20 at once: exactly one signs.
      const answers = await Promise.all(
        Array.from({ length: 20 }, () =>
          postJson(mesh, path, { ...body, approval_id: approvalId }, { token: signer.token }),
        ),
      );
      expect(answers.map((r) => r.status).sort()).toEqual([200, ...Array<number>(19).fill(403)]);
      for (const r of answers.filter((x) => x.status === 403)) expectApprovalRequired(r);
      const signed = answers.find((r) => r.status === 200)!;
      expect(verifyMessage(text, signed.body['signature'] as string)).toBe(signer.address);
      expectApprovalRequired(
        await postJson(mesh, path, { ...body, approval_id: approvalId }, { token: signer.token }),
      );
    });
  });
});
