import type {
  ApprovalCondition,
  ApprovalRequirement,
  ApprovalRule,
} from '@custos/proto/custos/identity/v1/agents';
import { conditionMatches, isConsensus, matchApprovalPolicy, ruleMatches } from './index.js';

const cond = (c: Partial<ApprovalCondition> & { type: string }): ApprovalCondition => ({
  chains: [],
  addresses: [],
  selectors: [],
  intentTypes: [],
  actions: [],
  actionKinds: [],
  ...c,
});
const req = (r: Partial<ApprovalRequirement> = {}): ApprovalRequirement => ({
  minApprovals: 1,
  requiredRoles: [],
  perRoleMinimums: {},
  requireCredentialTypes: [],
  ...r,
});
const rule = (conditions: ApprovalCondition[], r: Partial<ApprovalRule> = {}): ApprovalRule => ({
  conditions,
  riskTier: 1,
  skipWhen: [],
  requireWhen: [],
  ...r,
});
const policy = (...rules: ApprovalRule[]) => ({ rules });

const TX = {
  action: 'agent_transaction',
  intentType: 'transaction',
  chain: 'anvil',
  chainId: '31337',
  to: '0xAbCdEf0000000000000000000000000000000001',
  valueWei: 2_000_000_000_000_000_000n,
  selector: '0xa9059cbb',
  erc20Amount: 500n,
};

describe('matchApprovalPolicy', () => {
  it('answers undefined with no policy, no rules or no matching rule', () => {
    expect(matchApprovalPolicy(undefined, TX)).toBeUndefined();
    expect(matchApprovalPolicy(policy(), TX)).toBeUndefined();
    expect(
      matchApprovalPolicy(
        policy(rule([cond({ type: 'value_above', thresholdWei: '3000000000000000000' })])),
        TX,
      ),
    ).toBeUndefined();
  });

  it('value_above compares wei strictly, and gwei × 1e9 when no wei threshold is set', () => {
    const at = (thresholdWei?: string, thresholdGwei?: string) =>
      ruleMatches(rule([cond({ type: 'value_above', thresholdWei, thresholdGwei })]), TX);
    expect(at('1999999999999999999')).toBe(true);
    expect(at('2000000000000000000')).toBe(false);
    expect(at(undefined, '1999999999')).toBe(true);
    expect(at(undefined, '2000000000')).toBe(false);
    // wei wins over gwei
    expect(at('0', '5000000000')).toBe(true);
    // none set: any value above zero
    expect(at()).toBe(true);
    expect(ruleMatches(rule([cond({ type: 'value_above' })]), { ...TX, valueWei: 0n })).toBe(false);
  });

  it('chain_in takes the name or the chain id, whatever the case', () => {
    const m = (chains: string[]) => ruleMatches(rule([cond({ type: 'chain_in', chains })]), TX);
    expect(m(['ANVIL'])).toBe(true);
    expect(m(['31337'])).toBe(true);
    expect(m(['ethereum', '1'])).toBe(false);
  });

  it('to_address_in and function_selector_in are case-insensitive', () => {
    expect(ruleMatches(rule([cond({ type: 'to_address_in', addresses: [TX.to.toLowerCase()] })]), TX)).toBe(
      true,
    );
    expect(ruleMatches(rule([cond({ type: 'to_address_in', addresses: ['0x01'] })]), TX)).toBe(false);
    expect(ruleMatches(rule([cond({ type: 'function_selector_in', selectors: ['0xA9059CBB'] })]), TX)).toBe(
      true,
    );
    expect(ruleMatches(rule([cond({ type: 'function_selector_in', selectors: ['0x095ea7b3'] })]), TX)).toBe(
      false,
    );
  });

  it('to_address_in: base58 and other case-carrying addresses compare exactly; bech32 whatever the case', () => {
    const m = (addresses: string[], to: string) =>
      ruleMatches(rule([cond({ type: 'to_address_in', addresses })]), { to });
    const sol = '7EcDhSYGxXyscszYEp35KHN8vvw3svAuLKTzXwCFLtV';
    expect(m([sol], sol)).toBe(true);
    expect(m([sol.toLowerCase()], sol)).toBe(false);
    expect(m([sol], sol.toUpperCase())).toBe(false);
    const tron = 'TJRabPrwbZy45sbavfcjinPJC18kjpRTv8';
    expect(m([tron.toLowerCase()], tron)).toBe(false);
    const bc = 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4';
    expect(m([bc.toUpperCase()], bc)).toBe(true);
    expect(m([bc], bc.toUpperCase())).toBe(true);
    expect(
      m(['0xABCDEF0000000000000000000000000000000001'], '0xabcdef0000000000000000000000000000000001'),
    ).toBe(true);
  });

  it('erc20_amount_above matches an amount that cannot be known (fails closed)', () => {
    const c = cond({ type: 'erc20_amount_above', thresholdRaw: '1000000' });
    expect(ruleMatches(rule([c]), { erc20AmountUnknown: true })).toBe(true);
    expect(ruleMatches(rule([c]), { erc20AmountUnknown: false })).toBe(false);
    // a known amount decides
    expect(ruleMatches(rule([c]), { erc20Amount: 5n })).toBe(false);
  });

  it('an unknown ERC-20 amount never skips a rule: erc20_amount_above does not match in skip_when', () => {
    const always = cond({ type: 'always' });
    const above0 = cond({ type: 'erc20_amount_above', thresholdRaw: '0' });
    const unknown = { erc20AmountUnknown: true };
    // held: the skip set cannot be known to hold
    expect(ruleMatches(rule([always], { skipWhen: [{ conditions: [above0] }] }), unknown)).toBe(true);
    expect(
      matchApprovalPolicy(policy(rule([always], { skipWhen: [{ conditions: [above0] }] })), unknown),
    ).toBeDefined();
    // a known amount still skips
    expect(ruleMatches(rule([always], { skipWhen: [{ conditions: [above0] }] }), { erc20Amount: 1n })).toBe(
      false,
    );
    // in require_when and conditions an unknown amount matches (asks for a human)
    expect(ruleMatches(rule([always], { requireWhen: [{ conditions: [above0] }] }), unknown)).toBe(true);
    expect(ruleMatches(rule([above0]), unknown)).toBe(true);
    expect(conditionMatches(above0, unknown)).toBe(true);
    expect(conditionMatches(above0, unknown, 'skip')).toBe(false);
  });

  it('erc20_amount_above, intent_type_in, action_in, action_kind_in', () => {
    const m = (c: ApprovalCondition, f: object = TX) => ruleMatches(rule([c]), f);
    expect(m(cond({ type: 'erc20_amount_above', thresholdRaw: '499' }))).toBe(true);
    expect(m(cond({ type: 'erc20_amount_above', thresholdRaw: '500' }))).toBe(false);
    expect(m(cond({ type: 'intent_type_in', intentTypes: ['transaction'] }))).toBe(true);
    expect(m(cond({ type: 'intent_type_in', intentTypes: ['personal_sign'] }))).toBe(false);
    expect(m(cond({ type: 'action_in', actions: ['agent_transaction'] }))).toBe(true);
    expect(m(cond({ type: 'action_in', actions: ['agent_sign_intent'] }))).toBe(false);
    const kind = (kinds: string[], action: string) =>
      m(cond({ type: 'action_kind_in', actionKinds: kinds }), { action });
    expect(kind(['policy.*'], 'policy.create')).toBe(true);
    expect(kind(['policy.*'], 'policyx.create')).toBe(false);
    expect(kind(['policy.*'], 'policy')).toBe(false);
    expect(kind(['policy'], 'policy.create')).toBe(true);
    expect(kind(['policy'], 'policy')).toBe(true);
    expect(kind(['*'], 'anything.at_all')).toBe(true);
  });

  it('a condition whose fact is missing does not match; always always does; unknown types never', () => {
    const types: ApprovalCondition[] = [
      cond({ type: 'value_above', thresholdWei: '0' }),
      cond({ type: 'chain_in', chains: ['anvil', '31337'] }),
      cond({ type: 'to_address_in', addresses: [TX.to] }),
      cond({ type: 'function_selector_in', selectors: [TX.selector] }),
      cond({ type: 'erc20_amount_above', thresholdRaw: '0' }),
      cond({ type: 'intent_type_in', intentTypes: ['transaction'] }),
      cond({ type: 'action_in', actions: ['agent_transaction'] }),
      cond({ type: 'action_kind_in', actionKinds: ['*'] }),
    ];
    for (const c of types) {
      expect(ruleMatches(rule([c]), TX)).toBe(true);
      expect(ruleMatches(rule([c]), {})).toBe(false);
    }
    expect(ruleMatches(rule([cond({ type: 'always' })]), {})).toBe(true);
    expect(ruleMatches(rule([cond({ type: 'mystery' })]), TX)).toBe(false);
  });

  it('every condition of a rule must match', () => {
    const r = rule([
      cond({ type: 'chain_in', chains: ['anvil'] }),
      cond({ type: 'value_above', thresholdWei: '1' }),
    ]);
    expect(ruleMatches(r, TX)).toBe(true);
    expect(ruleMatches(r, { ...TX, chain: 'ethereum', chainId: '1' })).toBe(false);
    expect(ruleMatches(r, { ...TX, valueWei: 1n })).toBe(false);
  });

  it('skip_when: a fully matching set keeps the rule from applying; a partial or empty one does not', () => {
    const base = [cond({ type: 'always' })];
    const toKnown = cond({ type: 'to_address_in', addresses: [TX.to] });
    const onMainnet = cond({ type: 'chain_in', chains: ['ethereum'] });
    expect(ruleMatches(rule(base, { skipWhen: [{ conditions: [toKnown] }] }), TX)).toBe(false);
    expect(ruleMatches(rule(base, { skipWhen: [{ conditions: [toKnown, onMainnet] }] }), TX)).toBe(true);
    expect(
      ruleMatches(rule(base, { skipWhen: [{ conditions: [onMainnet] }, { conditions: [toKnown] }] }), TX),
    ).toBe(false);
    expect(ruleMatches(rule(base, { skipWhen: [{ conditions: [] }] }), TX)).toBe(true);
  });

  it('require_when: the rule applies only when a set fully matches', () => {
    const base = [cond({ type: 'always' })];
    const toKnown = cond({ type: 'to_address_in', addresses: [TX.to] });
    const onMainnet = cond({ type: 'chain_in', chains: ['ethereum'] });
    expect(ruleMatches(rule(base, { requireWhen: [{ conditions: [onMainnet] }] }), TX)).toBe(false);
    expect(
      ruleMatches(rule(base, { requireWhen: [{ conditions: [onMainnet] }, { conditions: [toKnown] }] }), TX),
    ).toBe(true);
    expect(ruleMatches(rule(base, { requireWhen: [{ conditions: [toKnown, onMainnet] }] }), TX)).toBe(false);
    expect(ruleMatches(rule(base, { requireWhen: [{ conditions: [] }] }), TX)).toBe(true);
  });

  it('the deciding rule: highest tier, then consensus, then more approvals, then the first', () => {
    const a = cond({ type: 'always' });
    const single = rule([a], { riskTier: 2 });
    const single2 = rule([a], { riskTier: 2, approval: req() });
    const two = rule([a], { riskTier: 2, approval: req({ minApprovals: 2 }) });
    const three = rule([a], { riskTier: 2, approval: req({ minApprovals: 3 }) });
    const roles = rule([a], { riskTier: 2, approval: req({ requiredRoles: ['admin'] }) });
    const t3 = rule([a], { riskTier: 3 });
    const nomatch = rule([cond({ type: 'chain_in', chains: ['ethereum'] })], { riskTier: 3 });
    expect(matchApprovalPolicy(policy(single, t3, two), TX)?.ruleIndex).toBe(1);
    expect(matchApprovalPolicy(policy(single, two, three), TX)?.ruleIndex).toBe(2);
    expect(matchApprovalPolicy(policy(single, roles), TX)?.ruleIndex).toBe(1);
    expect(matchApprovalPolicy(policy(single, single2), TX)?.ruleIndex).toBe(0);
    expect(matchApprovalPolicy(policy(nomatch, single), TX)).toMatchObject({ ruleIndex: 1, tier: 2 });
  });

  it('answers the tier, requirement, expiry and the rule in its HTTP shape', () => {
    const consensus = rule([cond({ type: 'value_above', thresholdWei: '1' })], {
      riskTier: 3,
      approval: req({ minApprovals: 2, requiredRoles: ['admin'], perRoleMinimums: { admin: 1 } }),
      expirySecs: '600',
      selfApprovalAllowed: true,
      skipWhen: [{ conditions: [cond({ type: 'to_address_in', addresses: ['0x01'] })] }],
    });
    const other = rule([cond({ type: 'always' })], { riskTier: 1, expirySecs: '300' });
    const m = matchApprovalPolicy(policy(other, consensus), TX);
    expect(m).toEqual({
      tier: 3,
      ruleIndex: 1,
      rule: consensus,
      ruleJson: {
        conditions: [{ type: 'value_above', threshold_wei: '1' }],
        risk_tier: 3,
        approval: { min_approvals: 2, required_roles: ['admin'], per_role_minimums: { admin: 1 } },
        expiry_secs: 600,
        self_approval_allowed: true,
        skip_when: [{ conditions: [{ type: 'to_address_in', addresses: ['0x01'] }] }],
      },
      requirement: { ...consensus.approval, selfApprovalAllowed: true },
      expirySecs: 300,
    });
    const s = matchApprovalPolicy(
      policy(rule([cond({ type: 'always' })], { riskTier: 2, approval: req() })),
      TX,
    );
    expect(s).toEqual({
      tier: 2,
      ruleIndex: 0,
      rule: expect.anything(),
      ruleJson: { conditions: [{ type: 'always' }], risk_tier: 2, approval: { min_approvals: 1 } },
    });
  });

  it('clamps tiers to 1..3', () => {
    expect(matchApprovalPolicy(policy(rule([cond({ type: 'always' })], { riskTier: 0 })), TX)?.tier).toBe(1);
    expect(matchApprovalPolicy(policy(rule([cond({ type: 'always' })], { riskTier: 9 })), TX)?.tier).toBe(3);
  });
});

describe('isConsensus', () => {
  it('is true for more than one approval or any role, per-role minimum or credential type', () => {
    expect(isConsensus(undefined)).toBe(false);
    expect(isConsensus(req())).toBe(false);
    expect(isConsensus(req({ minApprovals: 2 }))).toBe(true);
    expect(isConsensus(req({ requiredRoles: ['admin'] }))).toBe(true);
    expect(isConsensus(req({ perRoleMinimums: { admin: 1 } }))).toBe(true);
    expect(isConsensus(req({ requireCredentialTypes: ['totp'] }))).toBe(true);
  });
});
