import { InvalidArgumentError } from '@custos/service-kit';
import {
  changedFields,
  checkGrantChange,
  checkGrantInput,
  grantAuditDetails,
  grantEventData,
  secretPathPattern,
} from './grant-fns';
import type { GrantRecord, GrantRequest } from './grant-types';

const NOW = new Date('2030-01-01T00:00:00Z');
const AGENT = '11111111-1111-4111-8111-111111111111';

function refusal(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof InvalidArgumentError) return err.field;
    throw err;
  }
  return undefined;
}

const valid: GrantRequest = {
  secretPathPattern: 'prod/*',
  principalType: 'agent',
  principalId: AGENT,
  permissions: ['read'],
};

describe('secret_path_pattern', () => {
  it.each(['**', '*', 'prod/*', 'prod/**', 'a/**/b', 'a-b_c/D9'])('accepts %j', (p) => {
    expect(secretPathPattern(p)).toBe(p);
  });
  it.each(['', '/a', 'a/', 'a//b', 'db-*', '***', 'a.b', 'a b', 'x'.repeat(513)])('refuses %j', (p) => {
    expect(refusal(() => secretPathPattern(p))).toBe('secret_path_pattern');
  });
});

describe('checkGrantInput', () => {
  it('fills the defaults of effect, priority, conditions and expiry', () => {
    expect(checkGrantInput({ ...valid, permissions: ['write', 'read', 'read'] }, NOW)).toEqual({
      secretPathPattern: 'prod/*',
      principalType: 'agent',
      principalId: AGENT,
      permissions: ['read', 'write'],
      conditions: {},
      effect: 'allow',
      priority: 0,
      expiresAt: null,
      consensusTrigger: null,
    });
  });
  it('takes every optional field', () => {
    const g = checkGrantInput(
      {
        ...valid,
        principalId: AGENT.toUpperCase(),
        effect: 'deny',
        priority: 10,
        expiresAt: '2030-02-01T00:00:00Z',
        conditions: { ipCidrs: ['10.0.0.0/8'] },
      },
      NOW,
    );
    expect(g).toMatchObject({
      principalId: AGENT,
      effect: 'deny',
      priority: 10,
      expiresAt: new Date('2030-02-01T00:00:00Z'),
      conditions: { ipCidrs: ['10.0.0.0/8'] },
    });
  });
  // The gateway refuses wrong types and unknown fields; these are the rules a direct caller meets.
  it.each([
    [{ secretPathPattern: '' }, 'secret_path_pattern'],
    [{ principalType: 'group' }, 'principal_type'],
    [{ principalId: 'bob' }, 'principal_id'],
    [{ permissions: [] }, 'permissions'],
    [{ permissions: ['read', 'delete'] }, 'permissions'],
    [{ effect: 'maybe' }, 'effect'],
    [{ priority: -1 }, 'priority'],
    [{ priority: 1.5 }, 'priority'],
    [{ priority: 1_000_001 }, 'priority'],
    [{ expiresAt: 'tomorrow' }, 'expires_at'],
    [{ expiresAt: '2029-12-31T23:59:59Z' }, 'expires_at'],
    [{ conditions: { ipCidrs: ['nope'] } }, 'conditions.ip_cidrs'],
  ] as Array<[Partial<GrantRequest>, string]>)('refuses %j naming %s', (patch, field) => {
    expect(refusal(() => checkGrantInput({ ...valid, ...patch }, NOW))).toBe(field);
  });
});

describe('checkGrantChange', () => {
  it('keeps only the fields present; cleared fields reset to the default', () => {
    expect(checkGrantChange({ priority: 5, cleared: [] }, 'agent', NOW)).toEqual({ priority: 5 });
    const c = checkGrantChange({ cleared: ['expires_at', 'conditions', 'effect'] }, 'agent', NOW);
    expect(c).toEqual({ expiresAt: null, conditions: {}, effect: 'allow' });
    expect(changedFields(c)).toEqual(['conditions', 'effect', 'expires_at']);
    expect(checkGrantChange({ cleared: [] }, 'user', NOW)).toEqual({});
    expect(checkGrantChange({ permissions: [], cleared: [] }, 'user', NOW)).toEqual({});
  });
  it.each([
    [{ permissions: ['execute'], cleared: [] }, 'permissions'],
    [{ secretPathPattern: 'a//b', cleared: [] }, 'secret_path_pattern'],
    [{ conditions: { environmentIn: ['production'] }, cleared: [] }, 'conditions.environment_in'],
    [{ cleared: ['permissions'] }, 'permissions'],
    [{ priority: 3, cleared: ['priority'] }, 'priority'],
  ])('refuses %j naming %s', (change, field) => {
    expect(refusal(() => checkGrantChange(change, 'user', NOW))).toBe(field);
  });
});

describe('what events and audit records of a grant say', () => {
  const at = new Date('2030-01-01T00:00:00Z');
  const g: GrantRecord = {
    id: 'g',
    orgId: 'o',
    vaultId: 'v',
    secretPathPattern: '**',
    principalType: 'user',
    principalId: 'u',
    permissions: ['read'],
    conditions: { environmentIn: ['x'] },
    effect: 'allow',
    priority: 0,
    expiresAt: null,
    consensusTrigger: null,
    createdBy: 'c',
    createdAt: at,
    updatedAt: at,
  };
  it('names the grant, its facts, the actor and the changed fields', () => {
    expect(grantEventData(g, 'c', ['priority'])).toEqual({
      policy_id: 'g',
      id: 'g',
      vault_id: 'v',
      secret_path_pattern: '**',
      principal_type: 'user',
      principal_id: 'u',
      permissions: ['read'],
      conditions: { environment_in: ['x'] },
      effect: 'allow',
      priority: 0,
      expires_at: null,
      consensus_trigger: null,
      created_by: 'c',
      created_at: '2030-01-01T00:00:00.000Z',
      updated_at: '2030-01-01T00:00:00.000Z',
      actor_type: 'user',
      actor_id: 'c',
      changed: ['priority'],
    });
    expect(grantAuditDetails(g)).not.toHaveProperty('id');
    expect(grantAuditDetails(g)).toMatchObject({ vault_id: 'v', conditions: { environment_in: ['x'] } });
  });
});

describe('consensus_trigger', () => {
  const trigger = {
    conditions: [{ type: 'value_above' as const, thresholdWei: '1000' }],
    riskTier: 1,
    approval: { minApprovals: 2 },
  };
  const fieldOf = (fn: () => unknown): string | undefined => {
    try {
      fn();
    } catch (err) {
      return err instanceof InvalidArgumentError ? err.field : `not a 400: ${String(err)}`;
    }
    return undefined;
  };
  it('is kept on an agent grant, and absent means none', () => {
    expect(checkGrantInput({ ...valid, consensusTrigger: trigger }, NOW).consensusTrigger).toEqual(trigger);
    expect(checkGrantInput(valid, NOW).consensusTrigger).toBeNull();
  });
  it('is refused on a user grant, on create and on change', () => {
    expect(
      fieldOf(() => checkGrantInput({ ...valid, principalType: 'user', consensusTrigger: trigger }, NOW)),
    ).toBe('consensus_trigger');
    expect(fieldOf(() => checkGrantChange({ consensusTrigger: trigger, cleared: [] }, 'user', NOW))).toBe(
      'consensus_trigger',
    );
  });
  it('is checked as an approval rule, the 400 naming the field inside it', () => {
    const bad = { ...trigger, approval: { minApprovals: 0 } };
    expect(fieldOf(() => checkGrantInput({ ...valid, consensusTrigger: bad }, NOW))).toBe(
      'consensus_trigger.approval.min_approvals',
    );
    const noConditions = { ...trigger, conditions: [] };
    expect(
      fieldOf(() => checkGrantChange({ consensusTrigger: noConditions, cleared: [] }, 'agent', NOW)),
    ).toBe('consensus_trigger.conditions');
  });
  it('needs an approval, and takes no action conditions (a trigger is for transactions and sign intents)', () => {
    const { approval: _a, ...noApproval } = trigger;
    expect(fieldOf(() => checkGrantInput({ ...valid, consensusTrigger: noApproval }, NOW))).toBe(
      'consensus_trigger.approval',
    );
    const action = { ...trigger, conditions: [{ type: 'action_in' as const, actions: ['payments.send'] }] };
    expect(fieldOf(() => checkGrantInput({ ...valid, consensusTrigger: action }, NOW))).toBe(
      'consensus_trigger.conditions',
    );
    const skip = {
      ...trigger,
      skipWhen: [{ conditions: [{ type: 'action_kind_in' as const, actionKinds: ['x'] }] }],
    };
    expect(fieldOf(() => checkGrantChange({ consensusTrigger: skip, cleared: [] }, 'agent', NOW))).toBe(
      'consensus_trigger.conditions',
    );
  });

  it('is cleared to null, and may not be both set and cleared', () => {
    const change = checkGrantChange({ cleared: ['consensus_trigger'] }, 'agent', NOW);
    expect(change).toEqual({ consensusTrigger: null });
    expect(changedFields(change)).toEqual(['consensus_trigger']);
    expect(
      fieldOf(() =>
        checkGrantChange({ consensusTrigger: trigger, cleared: ['consensus_trigger'] }, 'agent', NOW),
      ),
    ).toBe('consensus_trigger');
  });
  it('shows in events and audit details in the API shape', () => {
    const data = grantEventData(
      {
        ...checkGrantInput({ ...valid, consensusTrigger: trigger }, NOW),
        id: 'g',
        orgId: 'o',
        vaultId: 'v',
        createdBy: 'c',
        createdAt: NOW,
        updatedAt: NOW,
      },
      'c',
    );
    expect(data['consensus_trigger']).toEqual({
      conditions: [{ type: 'value_above', threshold_wei: '1000' }],
      risk_tier: 1,
      approval: { min_approvals: 2 },
    });
  });
});
