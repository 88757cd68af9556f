import type { ApprovalRecord } from '../approvals/approval-types';
import { approvalsAccess, expirySecsOf } from './approvals-grpc';
import { InvalidArgumentError } from '@custos/service-kit';
import { type Approval, ListApprovalsResponse } from '@custos/proto/custos/approvals/v1/messages';
import { LIST_BYTES_MAX, approvalListItem, approvalListPage, approvalMessage } from './approvals-messages';

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
  it('leaves out the payload, the preview and the rule and cuts the texts to 200; the rest as approvalMessage', () => {
    const full: ApprovalRecord = {
      ...base,
      payload: { order: 'x'.repeat(60_000) },
      preview: { to: '0xabc' },
      rule: { match: 'r'.repeat(1000) },
      summary: {
        title: 'T'.repeat(200),
        body: 'b'.repeat(4000),
        fields: [{ label: 'l'.repeat(100), value: 'v'.repeat(1000) }],
      },
      kind: 'consensus',
      votes: [
        {
          userId: 'u1',
          role: 'admin',
          decision: 'approved',
          credentialType: 'password',
          reason: 'w'.repeat(1000),
          createdAt: new Date('2026-01-01T00:00:00Z'),
        },
      ],
    };
    expect(approvalMessage(full).payload).toBeDefined();
    expect(approvalMessage(full).rule).toBeDefined();
    const item = approvalListItem(full);
    expect(item.payload).toBeUndefined();
    expect(item.preview).toBeUndefined();
    expect(item.rule).toBeUndefined();
    expect(item.summary).toEqual({
      title: 'T'.repeat(200),
      body: 'b'.repeat(200),
      fields: [{ label: 'l'.repeat(100), value: 'v'.repeat(200) }],
    });
    expect(item.votes.map((v) => v.reason)).toEqual(['w'.repeat(200)]);
    const m = approvalMessage(full);
    expect(item).toEqual({
      ...m,
      payload: undefined,
      preview: undefined,
      rule: undefined,
      summary: item.summary,
      votes: [{ ...m.votes[0], reason: 'w'.repeat(200) }],
    });
  });
});

describe('approvalListPage', () => {
  const big = (i: number): ApprovalRecord => ({
    ...base,
    id: `6f1c1d52-6b7a-4c55-9a38-${String(i).padStart(12, '0')}`,
    summary: {
      title: 'T'.repeat(200),
      body: 'b'.repeat(4000),
      fields: Array.from({ length: 50 }, (_, k) => ({
        label: `l${k}`.padEnd(100, 'l'),
        value: 'v'.repeat(1000),
      })),
    },
    payload: { order: 'x'.repeat(60 * 1024) },
    preview: { to: 'p'.repeat(60 * 1024) },
    rule: { match: 'r'.repeat(60 * 1024) },
  });
  const encoded = (approvals: Approval[]): number =>
    ListApprovalsResponse.encode({ approvals }).finish().length;

  it("keeps a list of 100 of the largest approvals under gRPC's 4 MiB", () => {
    const list = Array.from({ length: 100 }, (_, i) => big(i));
    const page = approvalListPage(list);
    expect(page).toHaveLength(100);
    expect(encoded(page)).toBeLessThan(4 * 1024 * 1024);
  });

  it('ends a page of 500 early, in order, once the encoded list would pass 3 MiB', () => {
    const list = Array.from({ length: 500 }, (_, i) => big(i));
    const page = approvalListPage(list);
    expect(page.length).toBeGreaterThan(0);
    expect(page.length).toBeLessThan(500);
    expect(page.map((a) => a.id)).toEqual(list.slice(0, page.length).map((a) => a.id));
    expect(encoded(page)).toBeLessThanOrEqual(LIST_BYTES_MAX);
    // One more item would have passed the budget.
    expect(encoded(list.slice(0, page.length + 1).map(approvalListItem))).toBeGreaterThan(LIST_BYTES_MAX);
  });

  it('returns small lists whole and an empty list empty', () => {
    expect(approvalListPage([])).toEqual([]);
    expect(approvalListPage([base, { ...base, id: 'x' }])).toHaveLength(2);
  });
});

describe('approvalsAccess', () => {
  it('lets signer and the gateway (policy_change only, checked in the handlers) create and consume approvals, and the gateway do the rest', () => {
    expect(approvalsAccess.default).toEqual(['gateway']);
    expect(approvalsAccess.methods).toEqual({
      createApproval: ['signer', 'gateway'],
      consumeApproval: ['signer', 'gateway'],
    });
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
