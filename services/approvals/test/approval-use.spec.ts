import { randomUUID } from 'node:crypto';
import { agent, approvalsTestKit, human, refusal, transactionApproval } from './approval-test-kit';

// Creating, executing and using approvals, and their expiry, against real Postgres: the single
// use is one conditional update, so it holds under concurrency.

type Kit = Awaited<ReturnType<typeof approvalsTestKit>>;

describe('approvals: create, execute, consume, expire', () => {
  let kit: Kit;
  beforeAll(async () => {
    kit = await approvalsTestKit('custos_approvals_use');
  });
  afterAll(async () => {
    await kit?.close();
  });

  const decide = (p: ReturnType<typeof human>, id: string, decision = 'approve') =>
    kit.service.decide(p, id, { decision, reason: '', credential: '' });

  /** An approved single approval of a transaction, and what names its use. */
  async function approvedTransaction(org = randomUUID()) {
    const a = agent(org);
    const input = transactionApproval(org, a.agentId);
    const created = await kit.service.create(input);
    await decide(human(org), created.id);
    const use = {
      approvalId: created.id,
      orgId: org,
      agentId: a.agentId,
      action: 'agent_transaction',
      targetType: 'transaction',
      targetId: input.targetId,
    };
    return { created, use, org, agent: a };
  }

  async function consensusApproval(
    org: string,
    requirement: Record<string, unknown> = {},
    agentCreatedBy = '',
  ) {
    const a = agent(org);
    const input = transactionApproval(org, a.agentId, {
      agentCreatedBy,
      requirement: {
        minApprovals: 2,
        requiredRoles: ['admin'],
        perRoleMinimums: {},
        requireCredentialTypes: [],
        selfApprovalAllowed: false,
        ...requirement,
      },
    });
    const created = await kit.service.create(input);
    const use = {
      approvalId: created.id,
      orgId: org,
      agentId: a.agentId,
      action: 'agent_transaction',
      targetType: 'transaction',
      targetId: input.targetId,
    };
    return { created, use };
  }

  describe('CreateApproval', () => {
    it('keeps what signer computed and refuses what is not a platform-created approval', async () => {
      const org = randomUUID();
      const a = agent(org);
      const input = transactionApproval(org, a.agentId, {
        riskTier: 2,
        expirySecs: 120,
        agentCreatedBy: randomUUID(),
      });
      const r = await kit.service.create(input);
      expect(r).toMatchObject({
        action: 'agent_transaction',
        targetType: 'transaction',
        targetId: input.targetId,
        riskTier: 2,
        declaredRiskTier: null,
        userId: input.agentCreatedBy,
        preview: { chain: 'anvil' },
        rule: { risk_tier: 1 },
        kind: 'single',
        status: 'pending',
      });
      expect((r.expiresAt.getTime() - r.createdAt.getTime()) / 1000).toBeCloseTo(120, 0);
      expect(await kit.recordsOf(r.id)).toEqual(['approval.created', 'audit:approval.requested']);
      // Without a summary title: a neutral one.
      const untitled = await kit.service.create(transactionApproval(org, a.agentId, { summary: undefined }));
      expect(untitled.summary.title).toBe('Agent transaction');
      const cases: [Record<string, unknown>, string][] = [
        [{ action: 'payments.refund' }, 'action'],
        [{ targetType: 'sign_intent' }, 'target_type'],
        [{ targetId: '' }, 'target_id'],
        [{ riskTier: 0 }, 'risk_tier'],
        [{ orgId: 'x' }, 'org_id'],
        [{ agentId: 'x' }, 'agent_id'],
        [{ expirySecs: -1 }, 'expiry_secs'],
        [{ targetId: 'x'.repeat(501) }, 'target_id'],
        // A consensus no vote could meet: a tier 3 vote carries only TOTP; no vote is a passkey.
        [
          {
            riskTier: 3,
            requirement: {
              minApprovals: 2,
              requiredRoles: [],
              perRoleMinimums: {},
              requireCredentialTypes: ['password'],
              selfApprovalAllowed: false,
            },
          },
          'requirement.require_credential_types',
        ],
        [
          {
            requirement: {
              minApprovals: 2,
              requiredRoles: [],
              perRoleMinimums: {},
              requireCredentialTypes: ['passkey'],
              selfApprovalAllowed: false,
            },
          },
          'requirement.require_credential_types',
        ],
        [
          {
            requirement: {
              minApprovals: 2,
              requiredRoles: ['admin'],
              perRoleMinimums: { owner: 1 },
              requireCredentialTypes: [],
              selfApprovalAllowed: false,
            },
          },
          'requirement.per_role_minimums',
        ],
      ];
      const stored = await kit.pool.query('SELECT count(*) AS n FROM approvals.approvals');
      for (const [over, field] of cases) {
        const e = await refusal(kit.service.create(transactionApproval(org, a.agentId, over)));
        expect([e.httpStatus, e.field]).toEqual([400, field]);
      }
      expect((await kit.pool.query('SELECT count(*) AS n FROM approvals.approvals')).rows).toEqual(
        stored.rows,
      );
      expect(
        (await kit.service.create(transactionApproval(org, a.agentId, { targetId: 'x'.repeat(500) })))
          .targetId,
      ).toHaveLength(500);
      const sign = await kit.service.create(
        transactionApproval(org, a.agentId, {
          action: 'agent_sign_intent',
          targetType: 'sign_intent',
          targetId: 'ab'.repeat(32),
        }),
      );
      expect(sign.summary.title).toBe('Pay the supplier');
    });
  });

  describe('ConsumeApproval', () => {
    it('uses an approved approval once, for its target; the second use is 403 approval_required', async () => {
      const { created, use } = await approvedTransaction();
      const used = await kit.service.consume(use);
      expect(used.consumedAt).toBeInstanceOf(Date);
      const again = await refusal(kit.service.consume(use));
      expect([again.httpStatus, again.type, again.extensions['approval_request_id']]).toEqual([
        403,
        'approval_required',
        created.id,
      ]);
      expect(await kit.recordsOf(created.id)).toEqual([
        'approval.created',
        'audit:approval.requested',
        'approval.decided',
        'audit:approval.decided',
        'audit:approval.consumed',
      ]);
      const [audit] = (await kit.payloadsOf(created.id, 'audit.recorded')).filter(
        (p) => p['action'] === 'approval.consumed',
      );
      expect(audit).toMatchObject({
        actor_type: 'agent',
        actor_id: use.agentId,
        metadata: { by: `transaction:${use.targetId}` },
      });
    });

    it('50 parallel uses of one approval: exactly one succeeds', async () => {
      const { created, use } = await approvedTransaction();
      const results = await Promise.allSettled(Array.from({ length: 50 }, () => kit.service.consume(use)));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results)
        if (r.status === 'rejected') expect((r.reason as { type: string }).type).toBe('approval_required');
      expect(
        (await kit.payloadsOf(created.id, 'audit.recorded')).filter(
          (p) => p['action'] === 'approval.consumed',
        ),
      ).toHaveLength(1);
    });

    it('refuses another agent, org, action or target, a pending, rejected or expired approval, and changes nothing', async () => {
      const { created, use, org } = await approvedTransaction();
      for (const over of [
        { agentId: randomUUID() },
        { orgId: randomUUID() },
        { action: 'agent_sign_intent' },
        { targetType: 'sign_intent' },
        { targetId: randomUUID() },
        { approvalId: randomUUID() },
        { approvalId: 'nope' },
      ]) {
        const e = await refusal(kit.service.consume({ ...use, ...over }));
        expect([e.httpStatus, e.type]).toEqual([403, 'approval_required']);
      }
      expect((await kit.row(created.id))['consumed_at']).toBeNull();
      // Pending, rejected.
      const a = agent(org);
      const pendingInput = transactionApproval(org, a.agentId);
      const pending = await kit.service.create(pendingInput);
      const pendingUse = {
        ...use,
        approvalId: pending.id,
        agentId: a.agentId,
        targetId: pendingInput.targetId,
      };
      expect((await refusal(kit.service.consume(pendingUse))).type).toBe('approval_required');
      await decide(human(org), pending.id, 'reject');
      expect((await refusal(kit.service.consume(pendingUse))).type).toBe('approval_required');
      // Expired (not yet swept): expires_at bounds using too.
      await kit.expireNow(created.id);
      expect((await refusal(kit.service.consume(use))).type).toBe('approval_required');
      expect((await kit.row(created.id))['consumed_at']).toBeNull();
    });
  });

  describe('ExecutePendingApproval', () => {
    it('a consensus approval is usable only once executed, by a required role, once', async () => {
      const org = randomUUID();
      const { created, use } = await consensusApproval(org);
      const admin = human(org, 'admin');
      // Pending: 409; a member: 403.
      expect((await refusal(kit.service.execute(admin, created.id))).httpStatus).toBe(409);
      await decide(human(org, 'admin'), created.id);
      await decide(human(org, 'admin'), created.id);
      expect((await refusal(kit.service.execute(human(org, 'member'), created.id))).httpStatus).toBe(403);
      expect((await refusal(kit.service.execute(agent(org), created.id))).httpStatus).toBe(403);
      expect((await refusal(kit.service.execute(human(randomUUID(), 'admin'), created.id))).httpStatus).toBe(
        404,
      );
      // Approved but not executed: not usable.
      expect((await refusal(kit.service.consume(use))).type).toBe('approval_required');
      const executed = await kit.service.execute(admin, created.id);
      expect([executed.status, executed.executedBy]).toEqual(['executed', admin.userId]);
      expect(executed.executedAt).toBeInstanceOf(Date);
      expect((await refusal(kit.service.execute(admin, created.id))).httpStatus).toBe(409);
      expect(await kit.payloadsOf(created.id, 'pending_approval.executed')).toHaveLength(1);
      expect((await kit.recordsOf(created.id)).filter((n) => n === 'audit:approval.executed')).toHaveLength(
        1,
      );
      const results = await Promise.allSettled(Array.from({ length: 20 }, () => kit.service.consume(use)));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    });

    it("the agent's creator may not execute it unless self-approval is allowed (403, nothing changed)", async () => {
      const org = randomUUID();
      const creator = human(org, 'admin');
      const { created } = await consensusApproval(org, {}, creator.userId);
      await decide(human(org, 'admin'), created.id);
      await decide(human(org, 'admin'), created.id);
      const e = await refusal(kit.service.execute(creator, created.id));
      expect([e.httpStatus, e.detail]).toEqual([403, expect.stringMatching(/self-approval/)]);
      expect((await kit.row(created.id))['status']).toBe('approved');
      expect(await kit.payloadsOf(created.id, 'pending_approval.executed')).toHaveLength(0);
      expect((await kit.service.execute(human(org, 'admin'), created.id)).status).toBe('executed');
      // With self-approval allowed the creator executes it.
      const { created: own } = await consensusApproval(org, { selfApprovalAllowed: true }, creator.userId);
      await decide(human(org, 'admin'), own.id);
      await decide(creator, own.id);
      expect((await kit.service.execute(creator, own.id)).executedBy).toBe(creator.userId);
    });

    it('parallel executions: one wins, the rest 409; a single approval is never executed (409)', async () => {
      const org = randomUUID();
      const { created } = await consensusApproval(org, { requiredRoles: [] });
      await decide(human(org), created.id);
      await decide(human(org), created.id);
      const results = await Promise.allSettled(
        Array.from({ length: 10 }, () => kit.service.execute(human(org), created.id)),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results)
        if (r.status === 'rejected') expect((r.reason as { httpStatus: number }).httpStatus).toBe(409);
      const { created: single } = await approvedTransaction(org);
      const e = await refusal(kit.service.execute(human(org, 'owner'), single.id));
      expect(e.httpStatus).toBe(409);
      expect(e.detail).toMatch(/only consensus approvals are executed/);
      expect((await kit.row(single.id))['status']).toBe('approved');
    });
  });

  describe('expiry sweeper', () => {
    it('expires pending, approved-unused and executed-unused approvals once, leaves used and decided ones', async () => {
      const org = randomUUID();
      const pendingIn = transactionApproval(org, randomUUID());
      const pending = await kit.service.create(pendingIn);
      const { created: approved, use } = await approvedTransaction(org);
      const { created: used, use: usedUse } = await approvedTransaction(org);
      await kit.service.consume(usedUse);
      const { created: consensus } = await consensusApproval(org);
      const { created: executed } = await consensusApproval(org);
      await decide(human(org, 'admin'), executed.id);
      await decide(human(org, 'admin'), executed.id);
      await kit.service.execute(human(org, 'admin'), executed.id);
      const rejected = await kit.service.create(transactionApproval(org, randomUUID()));
      await decide(human(org), rejected.id, 'reject');
      await kit.service.sweep(1000); // what earlier tests left past their expiry
      for (const r of [pending, approved, used, consensus, executed, rejected]) await kit.expireNow(r.id);
      // Two sweeps at once (two replicas): each approval is ended by exactly one.
      const [n1, n2] = await Promise.all([kit.service.sweep(100), kit.service.sweep(100)]);
      const n3 = await kit.service.sweep(100);
      expect(n3).toBe(0);
      expect(n1 + n2).toBe(4);
      for (const r of [pending, approved, consensus, executed]) {
        expect((await kit.row(r.id))['status']).toBe('expired');
        expect((await kit.recordsOf(r.id)).filter((n) => n === 'audit:approval.expired')).toHaveLength(1);
      }
      expect(await kit.payloadsOf(consensus.id, 'pending_approval.expired')).toHaveLength(1);
      expect(await kit.payloadsOf(executed.id, 'pending_approval.expired')).toHaveLength(1);
      expect(await kit.payloadsOf(pending.id, 'pending_approval.expired')).toHaveLength(0);
      expect((await kit.row(used.id))['status']).toBe('approved');
      expect((await kit.row(rejected.id))['status']).toBe('rejected');
      // Nothing can be done with an expired approval.
      expect((await refusal(kit.service.consume(use))).type).toBe('approval_required');
      expect((await refusal(decide(human(org), pending.id))).httpStatus).toBe(409);
      const [audit] = (await kit.payloadsOf(approved.id, 'audit.recorded')).filter(
        (p) => p['action'] === 'approval.expired',
      );
      expect(audit).toMatchObject({ actor_type: 'system', metadata: { status_before: 'approved' } });
    });

    it('an approval created with a short expiry is ended by a sweep after it, not before', async () => {
      const org = randomUUID();
      const r = await kit.service.create(transactionApproval(org, randomUUID(), { expirySecs: 1 }));
      await kit.service.sweep(100);
      expect((await kit.row(r.id))['status']).toBe('pending');
      await new Promise((res) => setTimeout(res, 1200));
      await kit.service.sweep(100);
      expect((await kit.row(r.id))['status']).toBe('expired');
    });
  });
});
