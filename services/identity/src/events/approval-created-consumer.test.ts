import { approvalCreatedData } from './approval-created-consumer';

const ORG = '0b6d3c1e-7a2f-4e8b-9c1d-5e6f7a8b9c0d';
const APPROVAL = '6f1c1a52-8d8e-4c58-9a8e-2f1b7c1d9e01';
const AGENT = '9a7e3c2b-1d4f-4a6b-8c9d-0e1f2a3b4c5d';

const data = (extra: Record<string, unknown> = {}) => ({
  approval_id: APPROVAL,
  org_id: ORG,
  agent_id: AGENT,
  action: 'payments.send',
  target_type: 'invoice',
  target_id: 'inv-42',
  risk_tier: 2,
  kind: 'single',
  title: 'Pay invoice 42',
  expires_at: '2030-01-02T00:00:00.000Z',
  ...extra,
});

describe('approval notices: the event', () => {
  it('reads the approval an event announces', () => {
    expect(approvalCreatedData({ org_id: ORG, data: data() })).toEqual({
      approvalId: APPROVAL,
      orgId: ORG,
      agentId: AGENT,
      action: 'payments.send',
      riskTier: 2,
      kind: 'single',
      title: 'Pay invoice 42',
      targetType: 'invoice',
      targetId: 'inv-42',
      expiresAt: new Date('2030-01-02T00:00:00.000Z'),
    });
    // Platform-created and requested actions read the same; free text may be absent.
    const bare = approvalCreatedData({
      org_id: ORG,
      data: data({ action: 'agent_transaction', title: undefined, expires_at: 'soon', kind: 'consensus' }),
    });
    expect(bare).toMatchObject({
      action: 'agent_transaction',
      title: '',
      expiresAt: undefined,
      kind: 'consensus',
    });
  });

  it('drops an event that is not well-formed (dropped, not retried)', () => {
    const bad: Array<Record<string, unknown>> = [
      { approval_id: '../x' },
      { agent_id: 'agent' },
      { org_id: '11111111-1111-4111-8111-111111111111' }, // not the envelope's org
      { action: 'Pay me\r\nBcc: x@evil.test' },
      { action: `a.${'b'.repeat(63)}` },
      { action: 'a.b.c' },
      { risk_tier: 0 },
      { risk_tier: '2' },
      { kind: 'majority' },
    ];
    for (const extra of bad) expect(approvalCreatedData({ org_id: ORG, data: data(extra) })).toBeUndefined();
    expect(approvalCreatedData({ org_id: null, data: data() })).toBeUndefined();
    expect(approvalCreatedData({ org_id: 'not-an-org', data: data() })).toBeUndefined();
  });
});
