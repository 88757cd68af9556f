import { randomBytes } from 'node:crypto';
import type { SmtpCapture } from '@custos/testing';
import { TEST_PASSWORD, api, expectProblem, quickUser } from '../src/api';
import { auditRecords, decide, execute, getApproval } from '../src/approvals';
import { type Mesh, sharedMail, sharedMesh } from '../src/mesh';

// Issue 19: approvals an agent asks for (POST /v1/approvals/request), read, listed and decided by
// the humans of its org; the e-mail they get and the audit trail. No chain here (see
// approvals-transactions.spec.ts).

type User = Awaited<ReturnType<typeof quickUser>>;
type Body = Record<string, unknown>;
type Agent = { id: string; token: string };

const PLATFORM_ACTIONS = [
  'policy_change',
  'card_order',
  'agent_transaction',
  'agent_execution',
  'agent_sign_intent',
];

/** An agent of `user`'s org with these settings, and its token. */
async function newAgent(mesh: Mesh, user: User, settings: Body = {}): Promise<Agent> {
  const created = await api(mesh, 'POST', '/v1/agents', {
    token: user.token,
    body: { name: `ask-bot-${randomBytes(3).toString('hex')}`, ...settings },
  });
  if (created.status !== 201) throw new Error(`agent: ${created.status} ${JSON.stringify(created.body)}`);
  const id = (created.body['agent'] as { id: string }).id;
  const t = await api(mesh, 'POST', '/v1/auth/agent-token', {
    body: { agent_id: id, api_key: created.body['api_key'] },
  });
  if (t.status !== 200) throw new Error(`agent token: ${t.status} ${JSON.stringify(t.body)}`);
  return { id, token: t.body['access_token'] as string };
}

describe('approvals an agent requests (shared mesh)', () => {
  let mesh: Mesh;
  let smtp: SmtpCapture;
  let owner: User;
  let stranger: User;
  let agent: Agent;
  let sibling: Agent;

  const request = (a: Agent, body: Body) =>
    api(mesh, 'POST', '/v1/approvals/request', { token: a.token, body });
  const ask = (over: Body = {}): Body => ({
    action: 'payments.refund',
    target_type: 'invoice',
    target_id: `inv-${randomBytes(4).toString('hex')}`,
    summary: {
      title: 'Refund an invoice',
      body: 'Customer asked',
      fields: [{ label: 'Amount', value: '12.50' }],
    },
    payload: { amount: '12.50', currency: 'EUR' },
    reason: 'the customer complained',
    declared_risk_tier: 1,
    ...over,
  });
  const list = (token: string, query = '') => api(mesh, 'GET', `/v1/approvals${query}`, { token });

  beforeAll(async () => {
    mesh = await sharedMesh();
    smtp = sharedMail();
    owner = await quickUser(mesh);
    stranger = await quickUser(mesh);
    agent = await newAgent(mesh, owner, {
      action_approval_policy: {
        rules: [
          { conditions: [{ type: 'action_in', actions: ['payments.refund'] }], risk_tier: 3 },
          {
            conditions: [{ type: 'action_in', actions: ['treasury.move'] }],
            risk_tier: 1,
            approval: { min_approvals: 2 },
          },
        ],
      },
    });
    sibling = await newAgent(mesh, owner);
  });
  afterAll(async () => {
    await mesh?.stop();
    await smtp?.close();
  });

  it('an agent asks: 202 with Location; a matching action_in rule raises the enforced tier above the declared one', async () => {
    const body = ask();
    const r = await request(agent, body);
    expect({ status: r.status, body: r.body }).toMatchObject({
      status: 202,
      body: {
        org_id: owner.orgId,
        agent_id: agent.id,
        user_id: owner.userId,
        action: 'payments.refund',
        target_type: 'invoice',
        target_id: body['target_id'],
        summary: {
          title: 'Refund an invoice',
          body: 'Customer asked',
          fields: [{ label: 'Amount', value: '12.50' }],
        },
        payload: { amount: '12.50', currency: 'EUR' },
        reason: 'the customer complained',
        declared_risk_tier: 1,
        risk_tier: 3,
        enforced_risk_tier: 3,
        status: 'pending',
        kind: 'single',
        requirement: null,
        approvals_count: 0,
        votes: [],
        rule: { risk_tier: 3, conditions: [{ type: 'action_in' }] },
        decided_by: null,
        expires_at: expect.any(String),
      },
    });
    const id = r.body['id'] as string;
    expect(r.body['approval_id']).toBe(id);
    expect(r.headers.get('location')).toBe(`/v1/approvals/${id}`);
    // About a day by default.
    const ttl = Date.parse(r.body['expires_at'] as string) - Date.parse(r.body['created_at'] as string);
    expect(Math.abs(ttl - 86_400_000)).toBeLessThan(60_000);

    // No rule for this action: the declared tier stands; `risk_tier` is its deprecated name.
    const plain = await request(
      agent,
      ask({ action: 'docs.publish', declared_risk_tier: undefined, risk_tier: 2 }),
    );
    expect({ status: plain.status, body: plain.body }).toMatchObject({
      status: 202,
      body: { declared_risk_tier: 2, risk_tier: 2, enforced_risk_tier: 2, rule: null },
    });
    const none = await request(agent, ask({ action: 'access_request', declared_risk_tier: undefined }));
    expect({ status: none.status, body: none.body }).toMatchObject({
      status: 202,
      body: { declared_risk_tier: null, risk_tier: 1 },
    });
    // A rule asking for two humans makes it a consensus approval.
    const two = await request(agent, ask({ action: 'treasury.move' }));
    expect({ status: two.status, body: two.body }).toMatchObject({
      status: 202,
      body: { kind: 'consensus', requirement: { min_approvals: 2 } },
    });
  });

  it('reads: the agent it concerns and the humans of its org; anyone else 404', async () => {
    const r = await request(agent, ask({ action: 'docs.publish' }));
    const id = r.body['id'] as string;
    expect((await getApproval(mesh, agent.token, id)).body).toMatchObject({ id, status: 'pending' });
    expect((await getApproval(mesh, owner.token, id)).body).toMatchObject({ id, status: 'pending' });
    expectProblem(await getApproval(mesh, stranger.token, id), 404);
    expectProblem(await getApproval(mesh, sibling.token, id), 404);
    expectProblem(await getApproval(mesh, owner.token, '00000000-0000-4000-8000-000000000000'), 404);
  });

  it('refuses a human requester (403), platform-created actions and malformed fields (400 naming the field)', async () => {
    const before = (await list(owner.token, `?agent_id=${agent.id}&limit=500`)).body['approvals'] as Body[];
    expectProblem(await api(mesh, 'POST', '/v1/approvals/request', { token: owner.token, body: ask() }), 403);
    for (const action of PLATFORM_ACTIONS) {
      const r = await request(agent, ask({ action }));
      expectProblem(r, 400, { field: 'action' });
      expect(String(r.body['detail'])).toContain(action);
    }
    const long = `a.${'b'.repeat(63)}`;
    expect(long).toHaveLength(65);
    expectProblem(await request(agent, ask({ action: long })), 400, { field: 'action' });
    expect((await request(agent, ask({ action: long.slice(0, 64) }))).status).toBe(202);
    for (const action of ['Refund', 'payments', 'payments.', '.refund', 'payments.re-fund']) {
      expectProblem(await request(agent, ask({ action })), 400, { field: 'action' });
    }
    expectProblem(await request(agent, ask({ declared_risk_tier: 4 })), 400, { field: 'declared_risk_tier' });
    expectProblem(await request(agent, ask({ risk_tier: 0 })), 400, { field: 'risk_tier' });
    expectProblem(await request(agent, ask({ summary: { body: 'no title' } })), 400, {
      field: 'summary.title',
    });
    expectProblem(await request(agent, ask({ summary: { title: '   ', body: 'blank title' } })), 400, {
      field: 'summary.title',
    });
    expectProblem(await request(agent, ask({ payload: 'text' })), 400, { field: 'payload' });
    // Only the one 64-character request was recorded.
    const after = (await list(owner.token, `?agent_id=${agent.id}&limit=500`)).body['approvals'] as Body[];
    expect(after.length).toBe(before.length + 1);
  });

  it('decides: agents cannot (403); tier 1 needs a signed-in human; a decided approval is 409', async () => {
    const r = await request(agent, ask({ action: 'docs.publish', declared_risk_tier: 1 }));
    const id = r.body['id'] as string;
    expectProblem(await decide(mesh, agent.token, id, 'approve'), 403);
    expectProblem(await decide(mesh, sibling.token, id, 'approve'), 403);
    expectProblem(await decide(mesh, stranger.token, id, 'approve'), 404);
    expectProblem(await decide(mesh, owner.token, id, 'yes'), 400, { field: 'decision' });
    expect((await getApproval(mesh, owner.token, id)).body['status']).toBe('pending');
    const ok = await decide(mesh, owner.token, id, 'approve', undefined, 'fine');
    expect({ status: ok.status, body: ok.body }).toMatchObject({
      status: 200,
      body: {
        approval_id: id,
        status: 'approved',
        decided_by: owner.userId,
        decision_reason: 'fine',
        credential_type: 'session',
      },
    });
    expectProblem(await decide(mesh, owner.token, id, 'approve'), 409);
    expectProblem(await decide(mesh, owner.token, id, 'rejected'), 409);
    // A single approval is not executed.
    expectProblem(await execute(mesh, owner.token, id), 409);
    expect((await getApproval(mesh, agent.token, id)).body).toMatchObject({
      status: 'approved',
      decided_by: owner.userId,
    });

    // The tier the rule enforced (3) is not met by a session, nor by a password.
    const high = await request(agent, ask());
    const highId = high.body['id'] as string;
    const bare = await decide(mesh, owner.token, highId, 'approve');
    expectProblem(bare, 401, { type: 'step_up_required', purpose: 'approval.decide' });
    // Tier 3 accepts a TOTP code only, and its challenge says so.
    expect(bare.body['accepted']).toEqual(['totp']);
    const byPassword = await decide(mesh, owner.token, highId, 'approve', TEST_PASSWORD);
    expectProblem(byPassword, 403, { type: 'step_up_required' });
    expect(String(byPassword.body['detail']).toLowerCase()).toContain('totp');
    // Rejecting answers the same proof of presence.
    expectProblem(await decide(mesh, owner.token, highId, 'reject'), 401, { type: 'step_up_required' });
    expect((await getApproval(mesh, owner.token, highId)).body['status']).toBe('pending');
  });

  it('lists for humans, pending first, filtered by status and agent; agents get 403', async () => {
    const mine = await newAgent(mesh, owner);
    const a = await request(mine, ask({ action: 'docs.publish' }));
    const b = await request(mine, ask({ action: 'docs.publish' }));
    const c = await request(mine, ask({ action: 'docs.publish' }));
    const [ida, idb, idc] = [a, b, c].map((x) => x.body['id'] as string);
    // The oldest is decided: it comes after the pending ones even though the list is newest first.
    expect((await decide(mesh, owner.token, ida!, 'reject')).status).toBe(200);
    const all = await list(owner.token, `?agent_id=${mine.id}`);
    expect(all.status).toBe(200);
    expect((all.body['approvals'] as Body[]).map((x) => x['id'])).toEqual([idc, idb, ida]);
    const pending = await list(owner.token, `?agent_id=${mine.id}&status=pending`);
    expect((pending.body['approvals'] as Body[]).map((x) => x['id'])).toEqual([idc, idb]);
    const rejected = await list(owner.token, `?agent_id=${mine.id}&status=rejected`);
    expect((rejected.body['approvals'] as Body[]).map((x) => x['id'])).toEqual([ida]);
    // Items leave out the payload and the preview (null); GET one has the payload.
    for (const item of all.body['approvals'] as Body[]) {
      expect(item).toMatchObject({ payload: null, preview: null });
    }
    expect((await getApproval(mesh, owner.token, idc!)).body).toMatchObject({
      id: idc,
      payload: { amount: '12.50', currency: 'EUR' },
    });
    const limited = await list(owner.token, `?agent_id=${mine.id}&limit=1`);
    expect((limited.body['approvals'] as Body[]).map((x) => x['id'])).toEqual([idc]);
    // Pending first across the whole org list too.
    const org = (await list(owner.token, '?limit=500')).body['approvals'] as Body[];
    const statuses = org.map((x) => x['status']);
    expect(statuses.indexOf('pending')).toBe(0);
    expect(statuses.lastIndexOf('pending')).toBeLessThan(statuses.findIndex((s) => s !== 'pending'));
    // Another org sees none of them; an agent may not list.
    const theirs = (await list(stranger.token)).body['approvals'] as Body[];
    expect(theirs.filter((x) => x['org_id'] === owner.orgId)).toEqual([]);
    expectProblem(await list(mine.token), 403);
    expectProblem(await list(owner.token, '?status=waiting'), 400, { field: 'status' });
  });

  it("consensus: the agent's creator votes only when the rule allows it; require_credential_types asks for that proof", async () => {
    const bot = await newAgent(mesh, owner, {
      action_approval_policy: {
        rules: [
          {
            conditions: [{ type: 'action_in', actions: ['vault.move'] }],
            risk_tier: 1,
            approval: { min_approvals: 2 },
          },
          {
            conditions: [{ type: 'action_in', actions: ['vault.sweep'] }],
            risk_tier: 1,
            approval: { min_approvals: 2 },
            self_approval_allowed: true,
          },
          {
            conditions: [{ type: 'action_in', actions: ['vault.lock'] }],
            risk_tier: 1,
            approval: { min_approvals: 1, require_credential_types: ['password'] },
            self_approval_allowed: true,
          },
        ],
      },
    });
    // The owner created the agent: no vote by default.
    const move = await request(bot, ask({ action: 'vault.move' }));
    expect(move.body).toMatchObject({ kind: 'consensus', requirement: { self_approval_allowed: false } });
    const moveId = move.body['id'] as string;
    expectProblem(await decide(mesh, owner.token, moveId, 'approve'), 403);
    expect((await getApproval(mesh, owner.token, moveId)).body).toMatchObject({
      status: 'pending',
      votes: [],
    });

    const sweep = await request(bot, ask({ action: 'vault.sweep' }));
    expect(sweep.body).toMatchObject({ requirement: { min_approvals: 2, self_approval_allowed: true } });
    const sweepId = sweep.body['id'] as string;
    const vote = await decide(mesh, owner.token, sweepId, 'approve');
    expect({ status: vote.status, body: vote.body }).toMatchObject({
      status: 200,
      body: {
        status: 'pending',
        approvals_count: 1,
        votes: [{ user_id: owner.userId, role: 'owner', decision: 'approved', credential_type: 'session' }],
      },
    });
    expectProblem(await decide(mesh, owner.token, sweepId, 'approve'), 409);

    // One approving vote is enough only when it proved a password.
    const bySession = await request(bot, ask({ action: 'vault.lock' }));
    const s = await decide(mesh, owner.token, bySession.body['id'] as string, 'approve');
    expect({ status: s.status, body: s.body }).toMatchObject({
      status: 200,
      body: { status: 'pending', approvals_count: 1 },
    });
    const byPassword = await request(bot, ask({ action: 'vault.lock' }));
    const p = await decide(mesh, owner.token, byPassword.body['id'] as string, 'approve', TEST_PASSWORD);
    expect({ status: p.status, body: p.body }).toMatchObject({
      status: 200,
      body: { status: 'approved', approvals_count: 1, votes: [{ credential_type: 'password' }] },
    });
    // Executed by a human (no required roles), once.
    expect((await execute(mesh, owner.token, byPassword.body['id'] as string)).status).toBe(200);
    expectProblem(await execute(mesh, owner.token, byPassword.body['id'] as string), 409);
  });

  it("e-mails the org's humans a link to a new approval", async () => {
    const r = await request(
      agent,
      ask({ action: 'docs.publish', summary: { title: 'Publish the handbook' } }),
    );
    const id = r.body['id'] as string;
    const mail = await smtp.waitForMessage(
      (m) => m.recipients.includes(owner.email) && m.text.includes(id),
      15_000,
    );
    expect(mail.text).toContain(`https://custos.test`);
    expect(mail.text).toMatch(new RegExp(`https://custos\\.test/\\S*${id}`));
    expect(mail.subject + mail.text).toContain('Publish the handbook');
  });

  it('audits the request (by the agent) and the decision with the credential type', async () => {
    const r = await request(agent, ask({ action: 'docs.publish', declared_risk_tier: 1 }));
    const id = r.body['id'] as string;
    expect((await decide(mesh, owner.token, id, 'approve')).status).toBe(200);
    const about = (e: Body) => JSON.stringify(e).includes(id);
    const requested = await auditRecords(mesh, owner.token, 'approval.requested', about);
    expect(requested[0]).toMatchObject({ actor_type: 'agent', actor_id: agent.id });
    const decided = await auditRecords(mesh, owner.token, 'approval.decided', about);
    expect(decided[0]).toMatchObject({
      actor_type: 'user',
      actor_id: owner.userId,
      details: { decision: 'approved', credential_type: 'session' },
    });
  });
});
