import type { ApprovalRecord } from '../approvals/approval-types';
import { approvalsAccess, expirySecsOf } from './approvals-grpc';
import { InvalidArgumentError } from '@custos/service-kit';
import { approvalListItem, approvalMessage } from './approvals-messages';

const base: ApprovalRecord = {
  id: '6f1c1d52-6b7a-4c55-9a38-0d5c1f7d8b11',
  orgId: 'org',
  agentId: null,
  userId: null,
  action: 'payments.refund',
  targetType: 'order',
  targetId: '42',
  summary: { title: 't', body: '', fields: [] },
  payload: null,
  reason: null,
  declaredRiskTier: null,
  riskTier: 1,
  status: 'pending',
  kind: 'single',
  requirement: null,
  preview: null,
  rule: null,
  decisionReason: null,
  decidedBy: null,
  decidedAt: null,
  credentialType: null,
  expiresAt: new Date('2026-01-02T00:00:00Z'),
  executedAt: null,
  executedBy: null,
  consumedAt: null,
  consumedBy: null,
  createdAt: new Date('2026-01-01T00:00:00Z'),
  votes: [],
};

describe('approvalMessage', () => {
  it('answers empty strings and absent structs for what is not set', () => {
    const m = approvalMessage(base);
    expect(m).toMatchObject({
      agentId: '',
      userId: '',
      reason: '',
      declaredRiskTier: 0,
      decidedAt: '',
      consumedAt: '',
    });
    expect(m.payload).toBeUndefined();
    expect(m.requirement).toBeUndefined();
    expect(m.expiresAt).toBe('2026-01-02T00:00:00.000Z');
    expect(m.approvalsCount).toBe(0);
  });

  it('counts approving votes of a consensus, and 1 for an approved single approval (also once expired)', () => {
    const decided = { ...base, decidedBy: 'u', decidedAt: new Date(), credentialType: 'session' };
    expect(approvalMessage({ ...decided, status: 'approved' }).approvalsCount).toBe(1);
    expect(approvalMessage({ ...decided, status: 'expired' }).approvalsCount).toBe(1);
    expect(approvalMessage({ ...decided, status: 'rejected' }).approvalsCount).toBe(0);
    const vote = (decision: 'approved' | 'rejected') => ({
      userId: 'u',
      role: 'admin',
      decision,
      credentialType: 'session',
      reason: null,
      createdAt: new Date(),
    });
    const consensus: ApprovalRecord = {
      ...base,
      kind: 'consensus',
      requirement: {
        minApprovals: 3,
        requiredRoles: ['admin'],
        perRoleMinimums: {},
        requireCredentialTypes: [],
        selfApprovalAllowed: false,
      },
      votes: [vote('approved'), vote('approved'), vote('rejected')],
    };
    const m = approvalMessage(consensus);
    expect(m.approvalsCount).toBe(2);
    expect(m.votes.map((v) => [v.decision, v.reason])).toEqual([
      ['approved', ''],
      ['approved', ''],
      ['rejected', ''],
    ]);
    expect(m.requirement).toEqual({
      minApprovals: 3,
      requiredRoles: ['admin'],
      perRoleMinimums: {},
      requireCredentialTypes: [],
      selfApprovalAllowed: false,
    });
  });
});

describe('approvalListItem', () => {
  it('leaves out the payload and the preview (a list of many stays small); the rest as approvalMessage', () => {
    const full = { ...base, payload: { order: 'x'.repeat(60_000) }, preview: { to: '0xabc' } };
    expect(approvalMessage(full).payload).toBeDefined();
    const item = approvalListItem(full);
    expect(item.payload).toBeUndefined();
    expect(item.preview).toBeUndefined();
    expect(item).toEqual({ ...approvalMessage(full), payload: undefined, preview: undefined });
  });
});

describe('approvalsAccess', () => {
  it('lets only signer create and consume approvals, and the gateway do the rest', () => {
    expect(approvalsAccess.default).toEqual(['gateway']);
    expect(approvalsAccess.methods).toEqual({ createApproval: ['signer'], consumeApproval: ['signer'] });
  });
});

describe('expirySecsOf', () => {
  it('reads decimal digits only; empty is 0', () => {
    expect(expirySecsOf('')).toBe(0);
    expect(expirySecsOf('0')).toBe(0);
    expect(expirySecsOf('3600')).toBe(3600);
    for (const raw of ['1e3', '0x10', ' 5', '5 ', '-1', '1.5', '+5', 'Infinity', '99999999999999999'])
      expect(() => expirySecsOf(raw)).toThrow(InvalidArgumentError);
  });
});
