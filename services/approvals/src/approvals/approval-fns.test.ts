import fc from 'fast-check';
import { ConflictError, InvalidArgumentError } from '@custos/service-kit';
import {
  PLATFORM_ACTIONS,
  checkDeclaredTier,
  checkRequestedAction,
  checkRequirement,
  checkSummary,
  decisionOf,
  enforcedTier,
  executorRefusal,
  factsOfRequest,
  proofSatisfies,
  requireOpen,
  requirePending,
  tally,
  valueWeiOf,
  votableCredentialTypes,
  voterRefusal,
} from './approval-fns';
import type { Requirement } from './approval-types';

const req = (r: Partial<Requirement> = {}): Requirement => ({
  minApprovals: 2,
  requiredRoles: [],
  perRoleMinimums: {},
  requireCredentialTypes: [],
  selfApprovalAllowed: false,
  ...r,
});

/** The field an InvalidArgumentError names, or the error itself when it is another. */
function fieldOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (err) {
    if (err instanceof InvalidArgumentError) return err.field;
    throw err;
  }
  return undefined;
}

describe('decisionOf', () => {
  it('stores one vocabulary', () => {
    for (const d of ['approve', 'approved', 'APPROVE', ' approved ']) expect(decisionOf(d)).toBe('approved');
    for (const d of ['reject', 'rejected', 'denied', 'Denied']) expect(decisionOf(d)).toBe('rejected');
  });

  it('refuses anything else naming decision', () => {
    fc.assert(
      fc.property(fc.string(), (s) => {
        const known = ['approve', 'approved', 'reject', 'rejected', 'denied'].includes(
          s.trim().toLowerCase(),
        );
        if (known) return;
        expect(fieldOf(() => decisionOf(s))).toBe('decision');
      }),
    );
  });
});

describe('checkRequestedAction', () => {
  it('takes the control-plane actions and namespace.verb', () => {
    for (const a of [
      'access_request',
      'policy_request',
      'binding_request',
      'payments.refund',
      'crm.delete_contact',
    ])
      expect(checkRequestedAction(a)).toBe(a);
  });

  it('refuses the platform-created actions, other shapes and more than 64 characters, naming action', () => {
    for (const a of [
      ...PLATFORM_ACTIONS,
      '',
      'refund',
      'Payments.refund',
      'a.b.c',
      '1a.b',
      'a.',
      '.b',
      'a b.c',
    ])
      expect(fieldOf(() => checkRequestedAction(a))).toBe('action');
    const long = `a.${'b'.repeat(62)}`;
    expect(long).toHaveLength(64);
    expect(checkRequestedAction(long)).toBe(long);
    expect(fieldOf(() => checkRequestedAction(`${long}c`))).toBe('action');
  });

  it('accepts exactly the namespace.verb strings of at most 64 characters (property)', () => {
    const word = fc.stringMatching(/^[a-z][a-z0-9_]{0,30}$/);
    fc.assert(
      fc.property(word, word, (ns, verb) => {
        const a = `${ns}.${verb}`;
        if (a.length <= 64 && !(PLATFORM_ACTIONS as readonly string[]).includes(a))
          expect(checkRequestedAction(a)).toBe(a);
        else expect(fieldOf(() => checkRequestedAction(a))).toBe('action');
      }),
    );
    fc.assert(
      fc.property(fc.string({ maxLength: 70 }), (s) => {
        const ok = /^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$/.test(s) && s.length <= 64;
        const control = ['access_request', 'policy_request', 'binding_request'].includes(s);
        if (ok || control) expect(checkRequestedAction(s)).toBe(s);
        else expect(fieldOf(() => checkRequestedAction(s))).toBe('action');
      }),
    );
  });
});

describe('summary, tiers', () => {
  it('needs a title and bounds every part', () => {
    expect(fieldOf(() => checkSummary(undefined))).toBe('summary');
    expect(fieldOf(() => checkSummary({ title: ' ', body: '', fields: [] }))).toBe('summary.title');
    expect(fieldOf(() => checkSummary({ title: 'x'.repeat(201), body: '', fields: [] }))).toBe(
      'summary.title',
    );
    expect(fieldOf(() => checkSummary({ title: 't', body: 'x'.repeat(4001), fields: [] }))).toBe(
      'summary.body',
    );
    const many = Array.from({ length: 51 }, () => ({ label: 'l', value: 'v' }));
    expect(fieldOf(() => checkSummary({ title: 't', body: '', fields: many }))).toBe('summary.fields');
    expect(fieldOf(() => checkSummary({ title: 't', body: '', fields: [{ label: '', value: 'v' }] }))).toBe(
      'summary.fields[0].label',
    );
    expect(checkSummary({ title: 't', body: 'b', fields: [{ label: 'l', value: 'v' }] })).toEqual({
      title: 't',
      body: 'b',
      fields: [{ label: 'l', value: 'v' }],
    });
  });

  it('declared tier: 0 is none, 1-3 taken, anything else names declared_risk_tier', () => {
    expect(checkDeclaredTier(0)).toBeNull();
    for (const t of [1, 2, 3]) expect(checkDeclaredTier(t)).toBe(t);
    for (const t of [-1, 4, 99]) expect(fieldOf(() => checkDeclaredTier(t))).toBe('declared_risk_tier');
  });

  it('the enforced tier is the highest of declared and derived, within 1-3 (property)', () => {
    const tier = fc.option(fc.constantFrom(1, 2, 3), { nil: undefined });
    fc.assert(
      fc.property(tier, tier, (declared, derived) => {
        const t = enforcedTier(declared ?? null, derived);
        expect(t).toBeGreaterThanOrEqual(declared ?? 1);
        expect(t).toBeGreaterThanOrEqual(derived ?? 1);
        expect([1, 2, 3]).toContain(t);
        expect([declared ?? 1, derived ?? 1, 1]).toContain(t);
      }),
    );
  });
});

describe('facts of a request', () => {
  it('reads chain, to and value (wei, hex, or major units with a fraction)', () => {
    expect(factsOfRequest('payments.send', { chain: 'anvil', to: '0xabc', value: '0.5' })).toEqual({
      action: 'payments.send',
      chain: 'anvil',
      to: '0xabc',
      valueWei: 500000000000000000n,
    });
    expect(factsOfRequest('a.b', { value_wei: '123', value: '9' }).valueWei).toBe(123n);
    expect(factsOfRequest('a.b', { value: '0x10' }).valueWei).toBe(16n);
    expect(factsOfRequest('a.b', { chain: 31337 }).chainId).toBe('31337');
    expect(factsOfRequest('a.b', null)).toEqual({ action: 'a.b' });
    // Not a value: no fact at all.
    for (const v of ['abc', '-1', '1e5', 1.5, null, {}])
      expect(factsOfRequest('a.b', { value: v }).valueWei).toBeUndefined();
    expect(valueWeiOf('0.1', false)).toBeUndefined();
  });
});

describe('tally', () => {
  const approve = (role: string, credentialType = 'session') => ({
    role,
    decision: 'approved' as const,
    credentialType,
  });
  const reject = (role: string) => ({ role, decision: 'rejected' as const, credentialType: 'session' });

  it('approves at min_approvals, and one reject ends it', () => {
    const r = req({ minApprovals: 2 });
    expect(tally([approve('admin')], r).status).toBe('pending');
    expect(tally([approve('admin'), approve('member')], r).status).toBe('approved');
    expect(tally([approve('admin'), approve('member'), reject('owner')], r).status).toBe('rejected');
  });

  it('needs every per-role minimum and a required credential type', () => {
    const r = req({ minApprovals: 2, perRoleMinimums: { owner: 1 } });
    expect(tally([approve('admin'), approve('admin')], r).status).toBe('pending');
    expect(tally([approve('admin'), approve('owner')], r).status).toBe('approved');
    const c = req({ minApprovals: 2, requireCredentialTypes: ['totp'] });
    expect(tally([approve('admin'), approve('admin', 'password')], c).status).toBe('pending');
    expect(tally([approve('admin'), approve('admin', 'totp')], c).status).toBe('approved');
  });

  it('is approved exactly when the definition says so (property)', () => {
    const vote = fc.record({
      role: fc.constantFrom('owner', 'admin', 'member'),
      decision: fc.constantFrom('approved' as const, 'rejected' as const),
      credentialType: fc.constantFrom('session', 'password', 'totp', 'reauth_token'),
    });
    const requirement = fc.record({
      minApprovals: fc.integer({ min: 1, max: 5 }),
      requiredRoles: fc.constant([] as string[]),
      perRoleMinimums: fc.dictionary(
        fc.constantFrom('owner', 'admin', 'member'),
        fc.integer({ min: 0, max: 3 }),
      ),
      // What identity stores in require_credential_types (its CREDENTIAL_TYPES).
      requireCredentialTypes: fc.subarray(['password', 'totp']),
      selfApprovalAllowed: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(vote, { maxLength: 8 }), requirement, (votes, r) => {
        const t = tally(votes, r);
        const approving = votes.filter((v) => v.decision === 'approved');
        expect(t.approvals + t.rejections).toBe(votes.length);
        if (votes.some((v) => v.decision === 'rejected')) {
          expect(t.status).toBe('rejected');
          return;
        }
        const ok =
          approving.length >= r.minApprovals &&
          Object.entries(r.perRoleMinimums).every(
            ([role, n]) => approving.filter((v) => v.role === role).length >= n,
          ) &&
          (r.requireCredentialTypes.length === 0 ||
            approving.some((v) => r.requireCredentialTypes.includes(v.credentialType)));
        expect(t.status).toBe(ok ? 'approved' : 'pending');
        // Adding an approving vote never turns an approved tally back to pending.
        if (ok) expect(tally([...votes, approve('member', 'session')], r).status).toBe('approved');
      }),
    );
  });
});

describe('who may vote and execute', () => {
  it('refuses a role outside required_roles and the creator without self-approval', () => {
    const r = req({ requiredRoles: ['admin'] });
    expect(voterRefusal(r, { userId: 'u1', role: 'member' }, 'c')).toMatch(/admin/);
    expect(voterRefusal(r, { userId: 'u1', role: 'admin' }, 'c')).toBeUndefined();
    expect(voterRefusal(r, { userId: 'c', role: 'admin' }, 'c')).toMatch(/self-approval/);
    expect(
      voterRefusal({ ...r, selfApprovalAllowed: true }, { userId: 'c', role: 'admin' }, 'c'),
    ).toBeUndefined();
    expect(voterRefusal(req(), { userId: 'u', role: 'member' }, null)).toBeUndefined();
    expect(executorRefusal(r, { userId: 'u1', role: 'member' }, 'c')).toMatch(/admin/);
    expect(executorRefusal(r, { userId: 'u1', role: 'admin' }, 'c')).toBeUndefined();
    expect(executorRefusal(req(), { userId: 'u1', role: 'member' }, null)).toBeUndefined();
  });

  it('refuses the agent creator as executor unless self-approval is allowed', () => {
    const r = req({ requiredRoles: ['admin'] });
    expect(executorRefusal(r, { userId: 'c', role: 'admin' }, 'c')).toMatch(/self-approval/);
    expect(executorRefusal(req(), { userId: 'c', role: 'owner' }, 'c')).toMatch(/self-approval/);
    expect(
      executorRefusal({ ...r, selfApprovalAllowed: true }, { userId: 'c', role: 'admin' }, 'c'),
    ).toBeUndefined();
  });

  it('checks a requirement: min_approvals >= 1, known roles, naming the field at fault', () => {
    expect(fieldOf(() => checkRequirement(req({ minApprovals: 0 }), 1))).toBe('requirement.min_approvals');
    expect(fieldOf(() => checkRequirement(req({ requiredRoles: ['boss'] }), 1))).toBe(
      'requirement.required_roles',
    );
    expect(fieldOf(() => checkRequirement(req({ perRoleMinimums: { admin: -1 } }), 1))).toBe(
      'requirement.per_role_minimums',
    );
    // An unknown role in per_role_minimums names per_role_minimums, not required_roles.
    expect(fieldOf(() => checkRequirement(req({ perRoleMinimums: { boss: 1 } }), 1))).toBe(
      'requirement.per_role_minimums',
    );
    // A minimum of a role that may not vote can never be met.
    expect(
      fieldOf(() => checkRequirement(req({ requiredRoles: ['admin'], perRoleMinimums: { owner: 1 } }), 1)),
    ).toBe('requirement.per_role_minimums');
    expect(
      fieldOf(() => checkRequirement(req({ requiredRoles: ['admin'], perRoleMinimums: { admin: 2 } }), 1)),
    ).toBeUndefined();
    expect(checkRequirement(req({ requiredRoles: ['admin', 'admin'] }), 1).requiredRoles).toEqual(['admin']);
  });

  it('refuses credential types no vote at the tier can carry', () => {
    const types = (t: string[], tier: number) =>
      fieldOf(() => checkRequirement(req({ requireCredentialTypes: t }), tier));
    for (const t of ['passkey', 'biometric', 'api_key', 'sms'])
      for (const tier of [1, 2, 3]) expect(types([t], tier)).toBe('requirement.require_credential_types');
    expect(types(['password'], 3)).toBe('requirement.require_credential_types');
    expect(types(['reauth_token', 'password'], 3)).toBe('requirement.require_credential_types');
    expect(types(['session'], 2)).toBe('requirement.require_credential_types');
    expect(types(['password', 'totp'], 3)).toBeUndefined();
    expect(types(['password'], 2)).toBeUndefined();
    expect(types(['session'], 1)).toBeUndefined();
    expect(types([], 3)).toBeUndefined();
    // What a vote at each tier records is exactly what proofSatisfies lets through.
    for (const tier of [1, 2, 3])
      for (const m of ['session', 'password', 'totp', 'reauth_token'] as const)
        expect(votableCredentialTypes(tier).includes(m)).toBe(proofSatisfies(tier, m));
  });
});

describe('tier proofs', () => {
  it('tier 1 needs none, tier 2 any step-up, tier 3 a TOTP code', () => {
    expect(proofSatisfies(1, undefined)).toBe(true);
    expect(proofSatisfies(1, 'session')).toBe(true);
    expect(proofSatisfies(2, undefined)).toBe(false);
    expect(proofSatisfies(2, 'session')).toBe(false);
    for (const m of ['password', 'totp', 'reauth_token'] as const) expect(proofSatisfies(2, m)).toBe(true);
    expect(proofSatisfies(3, 'password')).toBe(false);
    expect(proofSatisfies(3, 'reauth_token')).toBe(false);
    expect(proofSatisfies(3, 'totp')).toBe(true);
  });

  it('an approval is open only while pending and, on the database clock, unexpired', () => {
    expect(() => requireOpen({ status: 'pending' }, true)).not.toThrow();
    expect(() => requirePending({ status: 'pending' })).not.toThrow();
    for (const status of ['approved', 'rejected', 'expired', 'executed'] as const) {
      expect(() => requireOpen({ status }, true)).toThrow(ConflictError);
      expect(() => requirePending({ status })).toThrow(ConflictError);
    }
    expect(() => requireOpen({ status: 'pending' }, false)).toThrow(/expired/);
  });
});
