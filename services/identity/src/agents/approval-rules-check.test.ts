import { InvalidArgumentError } from '@custos/service-kit';
import { checkAgentChange } from './agent-fns';
import type { ActionApprovalPolicy, ApprovalCondition, ApprovalRule } from './agent-types';
import { MAX_RULE_JSON_BYTES, approvalRuleJsonBytes, checkApprovalPolicy } from '@custos/approval-rules';

/** The field of the 400 a check throws; undefined when it passes. */
function fieldOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof InvalidArgumentError ? err.field : `not a 400: ${String(err)}`;
  }
  return undefined;
}

const big: ApprovalCondition = { type: 'value_above', thresholdWei: '1000000000000000000' };
const base: ApprovalCondition = { type: 'chain_in', chains: ['base'] };
const rule = (r: Partial<ApprovalRule>): ActionApprovalPolicy => ({
  rules: [{ conditions: [big], riskTier: 2, ...r }],
});
const sets = (n: number, perSet = 1) =>
  Array.from({ length: n }, () => ({ conditions: Array.from({ length: perSet }, () => base) }));
const check = (p: ActionApprovalPolicy) => fieldOf(() => checkApprovalPolicy(p));

describe('action_approval_policy checks', () => {
  it('takes a rule with self_approval_allowed, skip_when and require_when', () => {
    expect(
      check(
        rule({
          selfApprovalAllowed: true,
          skipWhen: [{ conditions: [{ type: 'to_address_in', addresses: ['0xabc'] }] }],
          requireWhen: [{ conditions: [base, { type: 'function_selector_in', selectors: ['0xa9059cbb'] }] }],
          approval: { minApprovals: 2, requiredRoles: ['admin'], perRoleMinimums: { admin: 1 } },
          expirySecs: 3600,
        }),
      ),
    ).toBeUndefined();
    // Up to 20 sets of up to 20 conditions each.
    expect(check(rule({ skipWhen: sets(20, 20), requireWhen: sets(20, 20) }))).toBeUndefined();
  });

  it('refuses more than 20 sets, more than 20 conditions in a set, or an empty set, naming the field', () => {
    expect(check(rule({ skipWhen: sets(21) }))).toBe('action_approval_policy.rules[0].skip_when');
    expect(check(rule({ requireWhen: sets(21) }))).toBe('action_approval_policy.rules[0].require_when');
    expect(check(rule({ skipWhen: [...sets(1), ...sets(1, 21)] }))).toBe(
      'action_approval_policy.rules[0].skip_when[1].conditions',
    );
    expect(check(rule({ requireWhen: [{ conditions: [] }] }))).toBe(
      'action_approval_policy.rules[0].require_when[0].conditions',
    );
  });

  it('checks the conditions of skip_when and require_when as it checks a rule’s conditions', () => {
    const bad: Array<[ApprovalCondition, string]> = [
      [{ type: 'sometimes' as 'always' }, 'type'],
      [{ type: 'value_above' }, 'threshold_wei'],
      [{ type: 'value_above', thresholdWei: '1e18' }, 'threshold_wei'],
      [{ type: 'value_above', thresholdGwei: -1 }, 'threshold_gwei'],
      [{ type: 'erc20_amount_above' }, 'threshold_raw'],
      [{ type: 'erc20_amount_above', thresholdRaw: '12.5' }, 'threshold_raw'],
      [{ type: 'chain_in', chains: ['x'.repeat(257)] }, 'chains[0]'],
      [{ type: 'action_in', actions: Array.from({ length: 1001 }, () => 'a.b') }, 'actions'],
      [{ type: 'always', chains: ['base'] }, 'chains'],
      [{ type: 'chain_in', chains: ['base'], addresses: ['0xabc'] }, 'addresses'],
    ];
    for (const [c, name] of bad) {
      expect(check({ rules: [{ conditions: [c], riskTier: 1 }] })).toBe(
        `action_approval_policy.rules[0].conditions[0].${name}`,
      );
      expect(check(rule({ skipWhen: [{ conditions: [base, c] }] }))).toBe(
        `action_approval_policy.rules[0].skip_when[0].conditions[1].${name}`,
      );
      expect(check(rule({ requireWhen: [...sets(2), { conditions: [c] }] }))).toBe(
        `action_approval_policy.rules[0].require_when[2].conditions[0].${name}`,
      );
    }
  });

  it('refuses a rule out of range: no conditions, tier, expiry, requirement, too many rules', () => {
    expect(check({ rules: [{ conditions: [], riskTier: 1 }] })).toBe(
      'action_approval_policy.rules[0].conditions',
    );
    expect(check(rule({ riskTier: 0 }))).toBe('action_approval_policy.rules[0].risk_tier');
    expect(check(rule({ riskTier: 4 }))).toBe('action_approval_policy.rules[0].risk_tier');
    expect(check(rule({ expirySecs: 59 }))).toBe('action_approval_policy.rules[0].expiry_secs');
    expect(check(rule({ approval: { minApprovals: 0 } }))).toBe(
      'action_approval_policy.rules[0].approval.min_approvals',
    );
    expect(check(rule({ approval: { minApprovals: 2, perRoleMinimums: { admin: 0 } } }))).toBe(
      'action_approval_policy.rules[0].approval.per_role_minimums.admin',
    );
    expect(check(rule({ approval: { minApprovals: 2, requireCredentialTypes: ['sms'] } }))).toBe(
      'action_approval_policy.rules[0].approval.require_credential_types[0]',
    );
  });

  it('roles: owner, admin or member only, and a per-role minimum only for a role that votes', () => {
    const approval = (a: Partial<NonNullable<ApprovalRule['approval']>>) =>
      check(rule({ approval: { minApprovals: 2, ...a } }));
    const at = 'action_approval_policy.rules[0].approval';
    expect(approval({ requiredRoles: ['admin', 'finance'] })).toBe(`${at}.required_roles[1]`);
    expect(approval({ requiredRoles: ['Admin'] })).toBe(`${at}.required_roles[0]`);
    expect(approval({ perRoleMinimums: { finance: 1 } })).toBe(`${at}.per_role_minimums.finance`);
    expect(approval({ perRoleMinimums: { ['x'.repeat(65)]: 1 } })).toBe(`${at}.per_role_minimums`);
    expect(approval({ requiredRoles: ['admin'], perRoleMinimums: { owner: 1 } })).toBe(
      `${at}.per_role_minimums.owner`,
    );
    expect(
      approval({ requiredRoles: ['owner', 'admin', 'member'], perRoleMinimums: { owner: 1, member: 2 } }),
    ).toBeUndefined();
    // No required_roles: every member votes, so any role's minimum can be met.
    expect(approval({ perRoleMinimums: { owner: 1 } })).toBeUndefined();
  });

  it('credential types: only what a vote proves (password, totp); a tier 3 rule must take totp', () => {
    const approval = (types: string[], riskTier = 2) =>
      check(rule({ riskTier, approval: { minApprovals: 2, requireCredentialTypes: types } }));
    const at = 'action_approval_policy.rules[0].approval.require_credential_types';
    for (const t of ['passkey', 'biometric', 'api_key', 'session', 'reauth_token'])
      expect(approval(['password', t])).toBe(`${at}[1]`);
    expect(approval(['password'])).toBeUndefined();
    expect(approval(['totp'])).toBeUndefined();
    expect(approval(['password'], 1)).toBeUndefined();
    expect(approval(['password'], 3)).toBe(at);
    expect(approval(['password', 'totp'], 3)).toBeUndefined();
    expect(approval([], 3)).toBeUndefined();
    const many = { rules: Array.from({ length: 51 }, () => rule({}).rules[0]!) };
    expect(check(many)).toBe('action_approval_policy.rules');
    expect(check({ rules: [] })).toBeUndefined();
  });

  it('refuses a rule whose JSON passes 32 KiB (approvals refuses a rule over 64 KiB), naming the rule', () => {
    // 1,000 addresses of 256 characters: each list within its limits, the rule ~258 KB of JSON.
    const addresses = Array.from({ length: 1000 }, (_, i) => String(i).padStart(256, 'a'));
    const wide: ApprovalCondition = { type: 'to_address_in', addresses };
    expect(check({ rules: [rule({}).rules[0]!, { conditions: [wide], riskTier: 2 }] })).toBe(
      'action_approval_policy.rules[1]',
    );
    // Just under and just over the limit, measured as the HTTP (snake_case) shape.
    const sized = (n: number): ApprovalRule => ({
      conditions: [{ type: 'to_address_in', addresses: Array.from({ length: n }, () => 'x'.repeat(256)) }],
      riskTier: 2,
    });
    const fits = sized(120);
    expect(approvalRuleJsonBytes(fits)).toBeLessThanOrEqual(MAX_RULE_JSON_BYTES);
    expect(approvalRuleJsonBytes(sized(130))).toBeGreaterThan(MAX_RULE_JSON_BYTES);
    expect(check({ rules: [fits] })).toBeUndefined();
    expect(check({ rules: [sized(130)] })).toBe('action_approval_policy.rules[0]');
    // Lists a gRPC message carries empty are not part of the HTTP shape.
    const empty = { chains: [], addresses: [], selectors: [], intentTypes: [], actions: [], actionKinds: [] };
    expect(
      approvalRuleJsonBytes({
        conditions: [{ ...big, ...empty }],
        riskTier: 2,
        expirySecs: 60,
        skipWhen: [],
      }),
    ).toBe(approvalRuleJsonBytes({ conditions: [big], riskTier: 2, expirySecs: 60 }));
    expect(approvalRuleJsonBytes({ conditions: [big], riskTier: 2, expirySecs: 60 })).toBe(
      Buffer.byteLength(
        JSON.stringify({
          conditions: [{ type: 'value_above', threshold_wei: '1000000000000000000' }],
          risk_tier: 2,
          expiry_secs: 60,
        }),
      ),
    );
  });

  it('is what a create or update of an agent checks', () => {
    const settings = { actionApprovalPolicy: rule({ skipWhen: sets(21) }) };
    expect(fieldOf(() => checkAgentChange({ name: 'x', settings }, 'create'))).toBe(
      'action_approval_policy.rules[0].skip_when',
    );
    expect(fieldOf(() => checkAgentChange({ settings }, 'update'))).toBe(
      'action_approval_policy.rules[0].skip_when',
    );
    // Clearing the policy is not a policy to check.
    expect(fieldOf(() => checkAgentChange({ settings: { actionApprovalPolicy: null } }, 'update'))).toBe(
      undefined,
    );
  });
});
