import { randomUUID } from 'node:crypto';
import { agent, approvalsTestKit, human, refusal } from './approval-test-kit';
import { policyChangeDeciderRefusal } from '../src/approvals/approval-service';

// The approval of a human's widening guardrail edit (issue 20, action policy_change), raised and
// used by the gateway, against real Postgres: the org and requester come from the caller, the
// requester may not decide it, deciders step up (tier 2), and it is used once for its hash.

type Kit = Awaited<ReturnType<typeof approvalsTestKit>>;

const HASH = 'a'.repeat(64);

describe('approvals: policy_change (guardrail edits)', () => {
  let kit: Kit;
  beforeAll(async () => {
    kit = await approvalsTestKit('custos_approvals_policy_change');
  });
  afterAll(async () => {
    await kit?.close();
  });

  function orgWithAgent() {
    const org = randomUUID();
    const a = agent(org);
    kit.identity.agents.set(`${org}/${a.agentId}`, { id: a.agentId, name: 'bot', orgId: org });
    return { org, agentId: a.agentId };
  }

  const raise = (p: ReturnType<typeof human>, agentId: string, over: Record<string, unknown> = {}) =>
    kit.service.createPolicyChange(p, {
      agentId,
      targetType: 'agent_guardrails',
      targetId: HASH,
      summary: undefined,
      preview: { change: 'widen', before: { tx_max_value_eth: '1' }, after: { tx_max_value_eth: '10' } },
      expirySecs: 0,
      ...over,
    });
  const use = (p: ReturnType<typeof human>, approvalId: string, agentId: string, targetId = HASH) =>
    kit.service.consumePolicyChange(p, {
      approvalId,
      agentId,
      action: 'policy_change',
      targetType: 'agent_guardrails',
      targetId,
    });

  it('is raised by the requester in its own org at tier 2, decided by another admin with a step-up, used once for its hash', async () => {
    const { org, agentId } = orgWithAgent();
    const requester = human(org, 'admin');
    const a = await raise(requester, agentId);
    expect(a).toMatchObject({
      orgId: org,
      agentId,
      userId: requester.userId,
      action: 'policy_change',
      riskTier: 2,
      kind: 'single',
      status: 'pending',
    });
    expect(a.summary.title).toBe('Guardrail change of agent bot');
    expect(await kit.recordsOf(a.id)).toEqual(['approval.created', 'audit:approval.requested']);
    const [requested] = await kit.payloadsOf(a.id, 'audit.recorded');
    expect(requested).toMatchObject({ actor_type: 'user', actor_id: requester.userId });

    // The requester may not decide it; a member may not either; another admin needs a step-up.
    expect(
      (
        await refusal(
          kit.service.decide(requester, a.id, { decision: 'approve', reason: '', credential: 'pw:x' }),
        )
      ).httpStatus,
    ).toBe(403);
    expect(
      (
        await refusal(
          kit.service.decide(human(org, 'member'), a.id, {
            decision: 'approve',
            reason: '',
            credential: 'pw:x',
          }),
        )
      ).httpStatus,
    ).toBe(403);
    const other = human(org, 'owner');
    expect(
      (await refusal(kit.service.decide(other, a.id, { decision: 'approve', reason: '', credential: '' })))
        .type,
    ).toBe('step_up_required');
    expect((await kit.row(a.id))['status']).toBe('pending');
    await kit.service.decide(other, a.id, { decision: 'approve', reason: '', credential: 'pw:x' });

    // Another hash, another agent or another org: 403 approval_required, still unused.
    expect((await refusal(use(requester, a.id, agentId, 'b'.repeat(64)))).type).toBe('approval_required');
    expect((await refusal(use(requester, a.id, randomUUID()))).type).toBe('approval_required');
    expect((await refusal(use(human(randomUUID()), a.id, agentId))).type).toBe('approval_required');
    expect((await kit.row(a.id))['consumed_at']).toBeNull();

    // Three parallel uses: one succeeds.
    const results = await Promise.allSettled([0, 1, 2].map(() => use(requester, a.id, agentId)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect((await refusal(use(requester, a.id, agentId))).type).toBe('approval_required');
  });

  it('refuses members, agents, other targets and agents of another org, storing nothing', async () => {
    const { org, agentId } = orgWithAgent();
    expect((await refusal(raise(human(org, 'member'), agentId))).httpStatus).toBe(403);
    expect((await refusal(raise(agent(org) as never, agentId))).httpStatus).toBe(403);
    expect((await refusal(raise(human(org), agentId, { targetType: 'transaction' }))).field).toBe(
      'target_type',
    );
    expect((await refusal(raise(human(org), agentId, { targetId: 'x' }))).field).toBe('target_id');
    expect((await refusal(raise(human(randomUUID()), agentId))).httpStatus).toBe(404);
    const { rows } = await kit.pool.query(
      `SELECT count(*)::int AS n FROM approvals.approvals WHERE agent_id = $1`,
      [agentId],
    );
    expect(rows[0].n).toBe(0);
  });

  it('names who may decide: owners and admins other than the requester', () => {
    const requester = randomUUID();
    expect(policyChangeDeciderRefusal({ userId: requester, role: 'owner' }, requester)).toMatch(
      /self-approval/,
    );
    expect(policyChangeDeciderRefusal({ userId: randomUUID(), role: 'member' }, requester)).toMatch(
      /owners and admins/,
    );
    expect(policyChangeDeciderRefusal({ userId: randomUUID(), role: 'admin' }, requester)).toBeUndefined();
  });
});
