import { randomUUID } from 'node:crypto';
import { agent, approvalsTestKit, human, refusal, rule, transactionApproval } from './approval-test-kit';

// Requests and decisions against real Postgres; identity is a fake peer (tier proofs, the agent's
// policy). Every refusal is checked for its status and that nothing changed.

type Kit = Awaited<ReturnType<typeof approvalsTestKit>>;

const summary = {
  title: 'Refund order 42',
  body: 'Customer asked',
  fields: [{ label: 'amount', value: '10 EUR' }],
};

/** Moves Date (the service's clock) by `offsetMs`; timers stay real for the database driver. */
function serviceClock(offsetMs: number): void {
  jest.useFakeTimers({
    now: Date.now() + offsetMs,
    doNotFake: [
      'hrtime',
      'nextTick',
      'performance',
      'queueMicrotask',
      'requestAnimationFrame',
      'cancelAnimationFrame',
      'requestIdleCallback',
      'cancelIdleCallback',
      'setImmediate',
      'clearImmediate',
      'setInterval',
      'clearInterval',
      'setTimeout',
      'clearTimeout',
    ],
  });
}

describe('approvals: request and decide', () => {
  let kit: Kit;
  beforeAll(async () => {
    kit = await approvalsTestKit('custos_approvals_decide');
  });
  afterAll(async () => {
    await kit?.close();
  });

  const count = async () =>
    Number((await kit.pool.query('SELECT count(*) AS n FROM approvals.approvals')).rows[0].n);

  const newAgent = (orgId: string, rules: Parameters<typeof rule>[0][] = [], createdBy = randomUUID()) => {
    const a = agent(orgId);
    kit.identity.agents.set(`${orgId}/${a.agentId}`, {
      createdBy,
      actionApprovalPolicy: { rules: rules.map(rule) },
    });
    return a;
  };

  const ask = (p: ReturnType<typeof agent>, over: Record<string, unknown> = {}) =>
    kit.service.request(p, {
      action: 'payments.refund',
      targetType: 'order',
      targetId: '42',
      summary,
      payload: { amount: 10 },
      reason: 'customer asked',
      declaredRiskTier: 0,
      ...over,
    });

  describe('RequestApproval', () => {
    it('refuses humans (403), platform-created and malformed actions, tiers and summaries (400 naming the field), storing nothing', async () => {
      const org = randomUUID();
      const a = newAgent(org);
      const before = await count();
      const h = human(org);
      const asHuman = await refusal(
        kit.service.request(h, {
          action: 'payments.refund',
          targetType: 'o',
          targetId: '1',
          summary,
          payload: undefined,
          reason: '',
          declaredRiskTier: 0,
        }),
      );
      expect(asHuman.httpStatus).toBe(403);
      for (const action of [
        'agent_transaction',
        'policy_change',
        'card_order',
        'agent_execution',
        'agent_sign_intent',
        'refund',
        `a.${'b'.repeat(63)}`,
      ]) {
        const e = await refusal(ask(a, { action }));
        expect([e.httpStatus, e.field]).toEqual([400, 'action']);
      }
      for (const t of [4, -1]) {
        const e = await refusal(ask(a, { declaredRiskTier: t }));
        expect([e.httpStatus, e.field]).toEqual([400, 'declared_risk_tier']);
      }
      expect((await refusal(ask(a, { summary: { title: '', body: '', fields: [] } }))).field).toBe(
        'summary.title',
      );
      expect((await refusal(ask(a, { targetType: '' }))).field).toBe('target_type');
      // The gateway's published limits: target_type 1-100, target_id 1-500.
      expect((await refusal(ask(a, { targetType: 'x'.repeat(101) }))).field).toBe('target_type');
      expect((await refusal(ask(a, { targetId: '' }))).field).toBe('target_id');
      expect((await refusal(ask(a, { targetId: 'x'.repeat(501) }))).field).toBe('target_id');
      expect((await refusal(ask(a, { reason: 'x'.repeat(1001) }))).field).toBe('reason');
      expect((await refusal(ask(a, { payload: { big: 'x'.repeat(70_000) } }))).field).toBe('payload');
      // An agent identity does not know (another org's): 404, nothing stored.
      expect((await refusal(ask(agent(org)))).httpStatus).toBe(404);
      expect(await count()).toBe(before);
    });

    it('stores a pending single approval with declared and enforced tier, the creator, events and audit', async () => {
      const org = randomUUID();
      const creator = randomUUID();
      const a = newAgent(org, [], creator);
      const r = await ask(a, { declaredRiskTier: 2 });
      expect(r).toMatchObject({
        orgId: org,
        agentId: a.agentId,
        userId: creator,
        action: 'payments.refund',
        targetType: 'order',
        targetId: '42',
        summary,
        payload: { amount: 10 },
        reason: 'customer asked',
        declaredRiskTier: 2,
        riskTier: 2,
        status: 'pending',
        kind: 'single',
        requirement: null,
        rule: null,
      });
      const ttl = (r.expiresAt.getTime() - r.createdAt.getTime()) / 1000;
      expect(ttl).toBeGreaterThan(86399);
      expect(ttl).toBeLessThan(86401);
      expect(await kit.recordsOf(r.id)).toEqual(['approval.created', 'audit:approval.requested']);
      const [created] = await kit.payloadsOf(r.id, 'approval.created');
      expect(created).toMatchObject({
        risk_tier: 2,
        kind: 'single',
        title: summary.title,
        action: 'payments.refund',
      });
      // Never the payload in the event.
      expect(JSON.stringify(created)).not.toContain('amount');
    });

    it('derives the tier from the agent policy and the payload: the higher of declared and derived wins', async () => {
      const org = randomUUID();
      const a = newAgent(org, [
        {
          conditions: [
            {
              type: 'value_above',
              thresholdWei: '1000',
              chains: [],
              addresses: [],
              selectors: [],
              intentTypes: [],
              actions: [],
              actionKinds: [],
            },
          ],
          riskTier: 3,
          expirySecs: 600,
        },
        {
          conditions: [
            {
              type: 'action_in',
              actions: ['payments.refund'],
              chains: [],
              addresses: [],
              selectors: [],
              intentTypes: [],
              actionKinds: [],
            },
          ],
          riskTier: 2,
        },
      ]);
      const low = await ask(a, { payload: { value: '5' }, declaredRiskTier: 1 });
      expect([low.declaredRiskTier, low.riskTier]).toEqual([1, 2]);
      expect(low.rule).toMatchObject({ risk_tier: 2 });
      const high = await ask(a, { payload: { value: '5000' }, declaredRiskTier: 0 });
      expect([high.declaredRiskTier, high.riskTier]).toEqual([null, 3]);
      // The matching rule's expiry wins over the default.
      expect((high.expiresAt.getTime() - high.createdAt.getTime()) / 1000).toBeCloseTo(600, 0);
      const none = await ask(newAgent(org), { declaredRiskTier: 0 });
      expect(none.riskTier).toBe(1);
    });

    it('makes a consensus approval when the matching rule asks for more than one human', async () => {
      const org = randomUUID();
      const a = newAgent(org, [
        {
          conditions: [
            {
              type: 'always',
              chains: [],
              addresses: [],
              selectors: [],
              intentTypes: [],
              actions: [],
              actionKinds: [],
            },
          ],
          riskTier: 1,
          approval: {
            minApprovals: 2,
            requiredRoles: ['admin'],
            perRoleMinimums: {},
            requireCredentialTypes: [],
          },
        },
      ]);
      const r = await ask(a);
      expect(r.kind).toBe('consensus');
      expect(r.requirement).toEqual({
        minApprovals: 2,
        requiredRoles: ['admin'],
        perRoleMinimums: {},
        requireCredentialTypes: [],
        selfApprovalAllowed: false,
      });
      expect(await kit.recordsOf(r.id)).toEqual([
        'approval.created',
        'pending_approval.created',
        'audit:approval.requested',
      ]);
    });

    it('takes the longest target_type and target_id the gateway publishes (100, 500)', async () => {
      const org = randomUUID();
      const r = await ask(newAgent(org), { targetType: 't'.repeat(100), targetId: 'i'.repeat(500) });
      expect([r.targetType.length, r.targetId.length]).toEqual([100, 500]);
    });

    it('a consensus no vote could meet is not blamed on fields the agent never sent, and stores nothing', async () => {
      const org = randomUUID();
      const always = [{ type: 'always' }] as Parameters<typeof rule>[0]['conditions'];
      const consensusRule = (riskTier: number, approval: Record<string, unknown>) => ({
        conditions: always,
        riskTier,
        approval: {
          minApprovals: 2,
          requiredRoles: [],
          perRoleMinimums: {},
          requireCredentialTypes: [],
          ...approval,
        },
      });
      const before = await count();
      // A stored rule naming a role approvals does not know (or credential types no vote carries):
      // 422, the policy is at fault.
      for (const bad of [
        { requiredRoles: ['finance'] },
        { perRoleMinimums: { finance: 1 } },
        { requireCredentialTypes: ['passkey'] },
      ]) {
        const e = await refusal(ask(newAgent(org, [consensusRule(2, bad)])));
        expect([e.httpStatus, e.field]).toEqual([422, undefined]);
        expect(e.detail).toMatch(/action_approval_policy rule 0/);
      }
      // A tier 2 rule asking for a password vote, raised to tier 3 by the agent (a tier 3 vote
      // carries only TOTP): the declared tier is at fault.
      const pw = newAgent(org, [consensusRule(2, { requireCredentialTypes: ['password'] })]);
      const e = await refusal(ask(pw, { declaredRiskTier: 3 }));
      expect([e.httpStatus, e.field]).toEqual([400, 'declared_risk_tier']);
      expect(await count()).toBe(before);
      expect((await ask(pw, { declaredRiskTier: 2 })).kind).toBe('consensus');
    });
  });

  describe('Get and List', () => {
    it('shows an approval to its agent and the org humans only; lists for humans, pending first', async () => {
      const org = randomUUID();
      const a = newAgent(org);
      const first = await ask(a);
      const second = await ask(a);
      const h = human(org);
      await kit.service.decide(h, first.id, { decision: 'approve', reason: '', credential: '' });
      const third = await ask(a);
      expect((await kit.service.get(a, first.id)).id).toBe(first.id);
      expect((await kit.service.get(h, first.id)).status).toBe('approved');
      for (const p of [agent(org), human(randomUUID()), agent(randomUUID(), a.agentId)])
        expect((await refusal(kit.service.get(p, first.id))).httpStatus).toBe(404);
      expect((await refusal(kit.service.get(h, 'not-a-uuid'))).httpStatus).toBe(404);
      const all = await kit.service.list(h, { status: '', agentId: '', limit: 0 });
      expect(all.map((x) => x.id)).toEqual([third.id, second.id, first.id]);
      expect(
        (await kit.service.list(h, { status: 'approved', agentId: '', limit: 0 })).map((x) => x.id),
      ).toEqual([first.id]);
      expect(
        (await kit.service.list(h, { status: '', agentId: a.agentId, limit: 1 })).map((x) => x.id),
      ).toEqual([third.id]);
      expect(await kit.service.list(human(randomUUID()), { status: '', agentId: '', limit: 0 })).toEqual([]);
      expect((await refusal(kit.service.list(a, { status: '', agentId: '', limit: 0 }))).httpStatus).toBe(
        403,
      );
      expect((await refusal(kit.service.list(h, { status: 'done', agentId: '', limit: 0 }))).field).toBe(
        'status',
      );
      expect((await refusal(kit.service.list(h, { status: '', agentId: 'x', limit: 0 }))).field).toBe(
        'agent_id',
      );
      expect((await refusal(kit.service.list(h, { status: '', agentId: '', limit: 501 }))).field).toBe(
        'limit',
      );
    });

    it('shows an unswept approval past its expiry as expired (Get, List and its status filter)', async () => {
      const org = randomUUID();
      const a = newAgent(org);
      const h = human(org);
      const open = await ask(a);
      const due = await ask(a);
      const approved = await ask(a);
      await kit.service.decide(h, approved.id, { decision: 'approve', reason: '', credential: '' });
      const rejected = await ask(a);
      await kit.service.decide(h, rejected.id, { decision: 'reject', reason: '', credential: '' });
      for (const id of [due.id, approved.id, rejected.id]) await kit.expireNow(id);
      expect((await kit.service.get(h, due.id)).status).toBe('expired');
      expect((await kit.service.get(a, approved.id)).status).toBe('expired');
      expect((await kit.service.get(h, rejected.id)).status).toBe('rejected');
      expect((await kit.service.get(h, open.id)).status).toBe('pending');
      const all = await kit.service.list(h, { status: '', agentId: '', limit: 0 });
      // Pending first (only the one still open), then newest first.
      expect(all.map((x) => [x.id, x.status])).toEqual([
        [open.id, 'pending'],
        [rejected.id, 'rejected'],
        [approved.id, 'expired'],
        [due.id, 'expired'],
      ]);
      const list = async (status: string) =>
        (await kit.service.list(h, { status, agentId: '', limit: 0 })).map((x) => x.id);
      expect(await list('pending')).toEqual([open.id]);
      expect(await list('approved')).toEqual([]);
      expect(await list('expired')).toEqual([approved.id, due.id]);
      // Reading changes nothing: the sweeper still records the expiry.
      expect((await kit.row(due.id))['status']).toBe('pending');
      expect((await kit.row(approved.id))['status']).toBe('approved');
    });
  });

  describe('DecideApproval (single)', () => {
    it('tier 1: a signed-in human decides once; agents, bad decisions and second decisions are refused, nothing changed', async () => {
      const org = randomUUID();
      const a = newAgent(org);
      const r = await ask(a);
      const h = human(org, 'member');
      expect(
        (await refusal(kit.service.decide(a, r.id, { decision: 'approve', reason: '', credential: '' })))
          .httpStatus,
      ).toBe(403);
      const bad = await refusal(
        kit.service.decide(h, r.id, { decision: 'maybe', reason: '', credential: '' }),
      );
      expect([bad.httpStatus, bad.field]).toEqual([400, 'decision']);
      expect(
        (
          await refusal(
            kit.service.decide(human(randomUUID()), r.id, {
              decision: 'approve',
              reason: '',
              credential: '',
            }),
          )
        ).httpStatus,
      ).toBe(404);
      expect((await kit.service.get(h, r.id)).status).toBe('pending');
      const d = await kit.service.decide(h, r.id, { decision: 'approved', reason: 'fine', credential: '' });
      expect(d).toMatchObject({
        status: 'approved',
        decidedBy: h.userId,
        decisionReason: 'fine',
        credentialType: 'session',
      });
      expect(d.decidedAt).toBeInstanceOf(Date);
      const again = await refusal(
        kit.service.decide(human(org), r.id, { decision: 'reject', reason: '', credential: '' }),
      );
      expect(again.httpStatus).toBe(409);
      expect((await kit.service.get(h, r.id)).decidedBy).toBe(h.userId);
      expect(await kit.recordsOf(r.id)).toEqual([
        'approval.created',
        'audit:approval.requested',
        'approval.decided',
        'audit:approval.decided',
      ]);
      const [audit] = (await kit.payloadsOf(r.id, 'audit.recorded')).filter(
        (p) => p['action'] === 'approval.decided',
      );
      expect(audit).toMatchObject({
        actor_type: 'user',
        actor_id: h.userId,
        metadata: { decision: 'approved', credential_type: 'session', risk_tier: 1 },
      });
      // Denied is stored as rejected.
      const other = await ask(a);
      expect(
        (await kit.service.decide(h, other.id, { decision: 'denied', reason: '', credential: '' })).status,
      ).toBe('rejected');
    });

    it('parallel decisions of one approval: exactly one wins, the others are 409', async () => {
      const org = randomUUID();
      const r = await ask(newAgent(org));
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) =>
          kit.service.decide(human(org), r.id, {
            decision: i % 2 ? 'approve' : 'reject',
            reason: '',
            credential: '',
          }),
        ),
      );
      const won = results.filter((x) => x.status === 'fulfilled');
      expect(won).toHaveLength(1);
      for (const x of results)
        if (x.status === 'rejected') expect((x.reason as { httpStatus: number }).httpStatus).toBe(409);
      expect((await kit.payloadsOf(r.id, 'approval.decided')).length).toBe(1);
    });

    it('tier 2: without a credential the step_up_required challenge (401), a wrong one 403, any method passes', async () => {
      const org = randomUUID();
      const a = newAgent(org);
      const r = await ask(a, { declaredRiskTier: 2 });
      const h = human(org);
      const challenge = await refusal(
        kit.service.decide(h, r.id, { decision: 'approve', reason: '', credential: '' }),
      );
      expect([challenge.httpStatus, challenge.type, challenge.extensions['purpose']]).toEqual([
        401,
        'step_up_required',
        'approval.decide',
      ]);
      expect(challenge.extensions['accepted']).toBe('reauth_token,password,totp');
      const wrong = await refusal(
        kit.service.decide(h, r.id, { decision: 'approve', reason: '', credential: 'guess' }),
      );
      expect([wrong.httpStatus, wrong.type]).toEqual([403, 'step_up_required']);
      expect((await kit.service.get(h, r.id)).status).toBe('pending');
      expect(kit.identity.stepUps.at(-1)).toEqual({
        userId: h.userId,
        purpose: 'approval.decide',
        credential: 'guess',
      });
      const d = await kit.service.decide(h, r.id, {
        decision: 'approve',
        reason: '',
        credential: 'pw:secret',
      });
      expect([d.status, d.credentialType]).toEqual(['approved', 'password']);
      const r2 = await ask(a, { declaredRiskTier: 2 });
      expect(
        (await kit.service.decide(h, r2.id, { decision: 'reject', reason: '', credential: 'rat_x' }))
          .credentialType,
      ).toBe('reauth_token');
    });

    it('tier 3: only a TOTP code; a password or rat_ token is 403 (the token is not even spent)', async () => {
      const org = randomUUID();
      const r = await ask(newAgent(org), { declaredRiskTier: 3 });
      const h = human(org);
      const challenge = await refusal(
        kit.service.decide(h, r.id, { decision: 'approve', reason: '', credential: '' }),
      );
      // The challenge names what tier 3 takes: a TOTP code only.
      expect([challenge.httpStatus, challenge.type, challenge.extensions]).toEqual([
        401,
        'step_up_required',
        { purpose: 'approval.decide', risk_tier: '3', accepted: 'totp' },
      ]);
      const pw = await refusal(
        kit.service.decide(h, r.id, { decision: 'approve', reason: '', credential: 'pw:secret' }),
      );
      expect([pw.httpStatus, pw.type, pw.extensions['accepted']]).toEqual([403, 'step_up_required', 'totp']);
      expect(pw.detail).toMatch(/TOTP/);
      const calls = kit.identity.stepUps.length;
      const rat = await refusal(
        kit.service.decide(h, r.id, { decision: 'approve', reason: '', credential: 'rat_abc' }),
      );
      expect([rat.httpStatus, rat.type]).toEqual([403, 'step_up_required']);
      expect(kit.identity.stepUps.length).toBe(calls);
      expect((await kit.service.get(h, r.id)).status).toBe('pending');
      const d = await kit.service.decide(h, r.id, {
        decision: 'approve',
        reason: '',
        credential: 'totp:123456',
      });
      expect([d.status, d.credentialType]).toEqual(['approved', 'totp']);
    });

    it('an expired approval cannot be decided (409)', async () => {
      const org = randomUUID();
      const r = await ask(newAgent(org));
      await kit.expireNow(r.id);
      expect(
        (
          await refusal(
            kit.service.decide(human(org), r.id, { decision: 'approve', reason: '', credential: '' }),
          )
        ).httpStatus,
      ).toBe(409);
      expect((await kit.row(r.id))['status']).toBe('pending');
    });

    it('expiry is judged on the database clock: a service clock that runs ahead does not close an open approval', async () => {
      const org = randomUUID();
      const r = await ask(newAgent(org));
      const c = await kit.service.create(
        transactionApproval(org, agent(org).agentId, {
          requirement: {
            minApprovals: 2,
            requiredRoles: [],
            perRoleMinimums: {},
            requireCredentialTypes: [],
            selfApprovalAllowed: false,
          },
        }),
      );
      // Only Date runs ahead (past both expiries); timers stay real for the database driver.
      serviceClock(30 * 86_400_000);
      try {
        const decided = await kit.service.decide(human(org), r.id, {
          decision: 'approve',
          reason: '',
          credential: '',
        });
        expect(decided.status).toBe('approved');
        await kit.service.decide(human(org), c.id, { decision: 'approve', reason: '', credential: '' });
      } finally {
        jest.useRealTimers();
      }
      expect((await kit.row(r.id))['status']).toBe('approved');
      expect((await kit.store.votes(c.id)).length).toBe(1);
      expect((await kit.row(c.id))['status']).toBe('pending');
    });

    it('expiry is judged on the database clock: an approval expired there is 409 whatever the service clock', async () => {
      const org = randomUUID();
      const lagging = kit.service;
      const r = await ask(newAgent(org));
      await kit.expireNow(r.id);
      serviceClock(-7 * 86_400_000);
      const e = await refusal(
        lagging.decide(human(org), r.id, { decision: 'approve', reason: '', credential: '' }),
      ).finally(() => jest.useRealTimers());
      expect([e.httpStatus, e.detail]).toEqual([409, expect.stringMatching(/expired/)]);
      expect((await kit.row(r.id))['status']).toBe('pending');
      expect(await kit.recordsOf(r.id)).toEqual(['approval.created', 'audit:approval.requested']);
      // A consensus vote that does not settle it: refused all the same, no vote recorded.
      const c = await kit.service.create(
        transactionApproval(org, agent(org).agentId, {
          requirement: {
            minApprovals: 3,
            requiredRoles: [],
            perRoleMinimums: {},
            requireCredentialTypes: [],
            selfApprovalAllowed: false,
          },
        }),
      );
      await lagging.decide(human(org), c.id, { decision: 'approve', reason: '', credential: '' });
      await kit.expireNow(c.id);
      const late = await refusal(
        lagging.decide(human(org), c.id, { decision: 'approve', reason: '', credential: '' }),
      );
      expect([late.httpStatus, late.detail]).toEqual([409, expect.stringMatching(/expired/)]);
      expect((await kit.store.votes(c.id)).length).toBe(1);
      expect((await kit.payloadsOf(c.id, 'approval.decided')).length).toBe(1);
    });
  });

  describe('consensus', () => {
    const consensus = async (org: string, requirement: Record<string, unknown>, createdBy = randomUUID()) => {
      const a = agent(org);
      return kit.service.create(
        transactionApproval(org, a.agentId, {
          agentCreatedBy: createdBy,
          requirement: {
            minApprovals: 2,
            requiredRoles: [],
            perRoleMinimums: {},
            requireCredentialTypes: [],
            selfApprovalAllowed: false,
            ...requirement,
          },
        }),
      );
    };
    const vote = (p: ReturnType<typeof human>, id: string, decision = 'approve', credential = '') =>
      kit.service.decide(p, id, { decision, reason: '', credential });

    it('2-of-3 admins: a member 403, the creator 403, a second vote 409, two admin votes approve', async () => {
      const org = randomUUID();
      const creator = human(org, 'admin');
      const r = await consensus(org, { requiredRoles: ['admin'] }, creator.userId);
      expect(r.kind).toBe('consensus');
      const [a1, a2] = [human(org, 'admin'), human(org, 'admin')];
      expect((await refusal(vote(human(org, 'member'), r.id))).httpStatus).toBe(403);
      expect((await refusal(vote(creator, r.id))).httpStatus).toBe(403);
      const one = await vote(a1, r.id);
      expect([one.status, one.votes.length]).toEqual(['pending', 1]);
      expect(one.votes[0]).toMatchObject({
        userId: a1.userId,
        role: 'admin',
        decision: 'approved',
        credentialType: 'session',
      });
      expect((await refusal(vote(a1, r.id))).httpStatus).toBe(409);
      expect((await refusal(vote(a1, r.id, 'reject'))).httpStatus).toBe(409);
      const two = await vote(a2, r.id);
      expect([two.status, two.votes.length, two.decidedBy]).toEqual(['approved', 2, a2.userId]);
      expect((await refusal(vote(human(org, 'admin'), r.id))).httpStatus).toBe(409);
      expect(await kit.recordsOf(r.id)).toEqual([
        'approval.created',
        'pending_approval.created',
        'audit:approval.requested',
        'approval.decided',
        'audit:approval.decided',
        'approval.decided',
        'pending_approval.approved',
        'audit:approval.decided',
      ]);
      const audits = (await kit.payloadsOf(r.id, 'audit.recorded')).filter(
        (p) => p['action'] === 'approval.decided',
      );
      expect(audits.map((p) => (p['metadata'] as Record<string, unknown>)['approvals'])).toEqual([1, 2]);
    });

    it('one reject rejects it; self-approval when the rule allows it', async () => {
      const org = randomUUID();
      const creator = human(org, 'owner');
      const r = await consensus(org, { minApprovals: 3, selfApprovalAllowed: true }, creator.userId);
      expect((await vote(creator, r.id)).status).toBe('pending');
      const rejected = await vote(human(org, 'member'), r.id, 'reject');
      expect(rejected.status).toBe('rejected');
      expect(await kit.payloadsOf(r.id, 'pending_approval.rejected')).toHaveLength(1);
      expect((await refusal(vote(human(org), r.id))).httpStatus).toBe(409);
    });

    it('per_role_minimums and require_credential_types hold it pending until met', async () => {
      const org = randomUUID();
      const r = await consensus(org, { perRoleMinimums: { owner: 1 } });
      expect((await vote(human(org, 'admin'), r.id)).status).toBe('pending');
      expect((await vote(human(org, 'admin'), r.id)).status).toBe('pending');
      expect((await vote(human(org, 'owner'), r.id)).status).toBe('approved');
      const t = await consensus(org, { requireCredentialTypes: ['totp'] });
      expect((await vote(human(org), t.id)).status).toBe('pending');
      expect((await vote(human(org), t.id, 'approve', 'pw:x')).status).toBe('pending');
      const done = await vote(human(org), t.id, 'approve', 'totp:1');
      expect(done.status).toBe('approved');
      expect(done.votes.map((v) => v.credentialType)).toEqual(['session', 'password', 'totp']);
    });

    it('parallel votes of many humans: every vote counted once, settled exactly once', async () => {
      const org = randomUUID();
      const r = await consensus(org, { minApprovals: 5 });
      const voters = Array.from({ length: 12 }, () => human(org));
      const results = await Promise.allSettled(voters.map((v) => vote(v, r.id)));
      const ok = results.filter((x) => x.status === 'fulfilled').length;
      expect(ok).toBe(5);
      for (const x of results)
        if (x.status === 'rejected') expect((x.reason as { httpStatus: number }).httpStatus).toBe(409);
      const after = await kit.service.get(human(org), r.id);
      expect([after.status, after.votes.length]).toEqual(['approved', 5]);
      expect(await kit.payloadsOf(r.id, 'pending_approval.approved')).toHaveLength(1);
    });
  });
});
