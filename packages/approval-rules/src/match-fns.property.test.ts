import fc from 'fast-check';
import type {
  ApprovalCondition,
  ApprovalConditionSet,
  ApprovalRequirement,
  ApprovalRule,
} from '@custos/proto/custos/identity/v1/agents';
import { type RuleFacts, isConsensus, matchApprovalPolicy, ruleMatches } from './index.js';

// Properties of the rule matcher over random policies and facts drawn from small vocabularies, so
// that conditions match often enough for the interesting paths to be taken.

const CHAINS = ['anvil', 'ethereum', 'bitcoin', '1', '31337'];
const ADDRS = [`0x${'a'.repeat(40)}`, `0x${'A'.repeat(40)}`, `0x${'b'.repeat(40)}`, 'bc1qxyzxyzq'];
const SELECTORS = ['0xa9059cbb', '0x095EA7B3', '0x23b872dd'];
const INTENTS = ['transaction', 'personal_sign', 'typed_data'];
const ACTIONS = ['agent_transaction', 'agent_sign_intent', 'policy.create', 'billing.pay'];

const some = <T>(xs: T[]) => fc.subarray(xs);
const amount = fc.bigInt({ min: 0n, max: 10n ** 20n });

const condition: fc.Arbitrary<ApprovalCondition> = fc
  .oneof(
    fc.record({ type: fc.constant('always') }),
    fc.record({
      type: fc.constant('value_above'),
      thresholdWei: fc.option(amount.map(String), { nil: undefined }),
      thresholdGwei: fc.option(fc.bigInt({ min: 0n, max: 10n ** 11n }).map(String), { nil: undefined }),
    }),
    fc.record({ type: fc.constant('chain_in'), chains: some(CHAINS) }),
    fc.record({ type: fc.constant('to_address_in'), addresses: some(ADDRS) }),
    fc.record({ type: fc.constant('function_selector_in'), selectors: some(SELECTORS) }),
    fc.record({ type: fc.constant('erc20_amount_above'), thresholdRaw: amount.map(String) }),
    fc.record({ type: fc.constant('intent_type_in'), intentTypes: some(INTENTS) }),
    fc.record({ type: fc.constant('action_in'), actions: some(ACTIONS) }),
    fc.record({
      type: fc.constant('action_kind_in'),
      actionKinds: some(['policy.*', 'agent_transaction', '*']),
    }),
  )
  .map((c) => ({
    chains: [],
    addresses: [],
    selectors: [],
    intentTypes: [],
    actions: [],
    actionKinds: [],
    ...c,
  }));

const conditionSet: fc.Arbitrary<ApprovalConditionSet> = fc.record({
  conditions: fc.array(condition, { maxLength: 3 }),
});

const requirement: fc.Arbitrary<ApprovalRequirement> = fc.record({
  minApprovals: fc.integer({ min: 1, max: 5 }),
  requiredRoles: some(['admin', 'owner']),
  perRoleMinimums: fc.dictionary(fc.constantFrom('admin', 'owner'), fc.integer({ min: 1, max: 3 })),
  requireCredentialTypes: some(['totp', 'passkey']),
});

const rule: fc.Arbitrary<ApprovalRule> = fc.record({
  conditions: fc.array(condition, { minLength: 1, maxLength: 3 }),
  riskTier: fc.integer({ min: 1, max: 3 }),
  approval: fc.option(requirement, { nil: undefined }),
  expirySecs: fc.option(fc.integer({ min: 60, max: 100_000 }).map(String), { nil: undefined }),
  selfApprovalAllowed: fc.option(fc.boolean(), { nil: undefined }),
  skipWhen: fc.array(conditionSet, { maxLength: 2 }),
  requireWhen: fc.array(conditionSet, { maxLength: 2 }),
});

const policy = fc.record({ rules: fc.array(rule, { maxLength: 6 }) });

const facts: fc.Arbitrary<RuleFacts> = fc.record(
  {
    action: fc.constantFrom(...ACTIONS),
    intentType: fc.constantFrom(...INTENTS),
    chain: fc.constantFrom('anvil', 'ethereum', 'bitcoin'),
    chainId: fc.constantFrom('1', '31337'),
    to: fc.constantFrom(...ADDRS),
    valueWei: amount,
    selector: fc.constantFrom(...SELECTORS.map((s) => s.toLowerCase())),
    erc20Amount: amount,
  },
  { requiredKeys: [] },
);

const flipCase = (s: string, mask: number) =>
  [...s].map((ch, i) => ((mask >> i % 30) & 1 ? ch.toUpperCase() : ch.toLowerCase())).join('');

describe('matchApprovalPolicy properties', () => {
  it('matches iff some rule matches; the tier is the highest of the matching rules; the deciding rule matches', () => {
    fc.assert(
      fc.property(policy, facts, (p, f) => {
        const matching = p.rules.map((r, i) => [r, i] as const).filter(([r]) => ruleMatches(r, f));
        const m = matchApprovalPolicy(p, f);
        if (matching.length === 0) return m === undefined;
        if (!m) return false;
        const maxTier = Math.max(...matching.map(([r]) => r.riskTier));
        return (
          m.tier === maxTier &&
          m.rule === p.rules[m.ruleIndex] &&
          ruleMatches(m.rule, f) &&
          m.rule.riskTier === maxTier
        );
      }),
    );
  });

  it('no other matching rule of the same tier asks for more humans, and earlier equals lose to none', () => {
    fc.assert(
      fc.property(policy, facts, (p, f) => {
        const m = matchApprovalPolicy(p, f);
        if (!m) return true;
        const key = (r: ApprovalRule): [number, number] => [
          isConsensus(r.approval) ? 1 : 0,
          Math.max(1, r.approval?.minApprovals ?? 1),
        ];
        const [mc, mn] = key(m.rule);
        return p.rules.every((r, i) => {
          if (i === m.ruleIndex || !ruleMatches(r, f) || r.riskTier !== m.tier) return true;
          const [c, n] = key(r);
          if (c !== mc) return c < mc;
          if (n !== mn) return n < mn;
          return i > m.ruleIndex; // a same-ranked rule comes after the deciding one
        });
      }),
    );
  });

  it('among rules that all match, the deciding one is the reference order: tier, consensus, approvals, first', () => {
    const alwaysRule = fc.record({
      riskTier: fc.integer({ min: 1, max: 3 }),
      approval: fc.option(requirement, { nil: undefined }),
    });
    fc.assert(
      fc.property(fc.array(alwaysRule, { minLength: 1, maxLength: 8 }), facts, (rs, f) => {
        const rules: ApprovalRule[] = rs.map((r) => ({
          ...r,
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
          skipWhen: [],
          requireWhen: [],
        }));
        const score = (r: ApprovalRule) =>
          r.riskTier * 1_000 +
          (isConsensus(r.approval) ? 100 : 0) +
          Math.max(1, r.approval?.minApprovals ?? 1);
        let best = 0;
        rules.forEach((r, i) => {
          if (score(r) > score(rules[best]!)) best = i;
        });
        return matchApprovalPolicy({ rules }, f)?.ruleIndex === best;
      }),
    );
  });

  it('expirySecs is the smallest expiry of the matching rules; requirement iff the deciding rule is a consensus', () => {
    fc.assert(
      fc.property(policy, facts, (p, f) => {
        const m = matchApprovalPolicy(p, f);
        if (!m) return true;
        const expiries = p.rules
          .filter((r) => ruleMatches(r, f) && r.expirySecs)
          .map((r) => Number(r.expirySecs));
        const expected = expiries.length ? Math.min(...expiries) : undefined;
        const consensus = isConsensus(m.rule.approval);
        return (
          m.expirySecs === expected &&
          (m.requirement !== undefined) === consensus &&
          (!consensus || m.requirement!.selfApprovalAllowed === (m.rule.selfApprovalAllowed ?? false))
        );
      }),
    );
  });

  it('appending a rule that does not match, or removing facts no rule reads, changes nothing', () => {
    fc.assert(
      fc.property(policy, facts, rule, (p, f, extra) => {
        const never: ApprovalRule = {
          ...extra,
          conditions: [...extra.conditions, { ...extra.conditions[0]!, type: 'x' }],
        };
        const before = matchApprovalPolicy(p, f);
        const after = matchApprovalPolicy({ rules: [...p.rules, never] }, f);
        return (
          JSON.stringify(before, (_k, v) => (typeof v === 'bigint' ? String(v) : v)) ===
          JSON.stringify(after, (_k, v) => (typeof v === 'bigint' ? String(v) : v))
        );
      }),
    );
  });

  it('a skip_when set equal to the rule’s own (non-empty) conditions always keeps it from applying', () => {
    fc.assert(
      fc.property(
        rule,
        facts,
        (r, f) => !ruleMatches({ ...r, skipWhen: [...r.skipWhen, { conditions: r.conditions }] }, f),
      ),
    );
  });

  it('with an unknown ERC-20 amount, a skip_when set with erc20_amount_above never skips; in conditions it always holds', () => {
    fc.assert(
      fc.property(rule, facts, fc.array(condition, { maxLength: 3 }), amount, (r, f0, extra, t) => {
        const { erc20Amount: _known, ...rest } = f0;
        const f: RuleFacts = { ...rest, erc20AmountUnknown: true };
        const above: ApprovalCondition = {
          type: 'erc20_amount_above',
          thresholdRaw: String(t),
          chains: [],
          addresses: [],
          selectors: [],
          intentTypes: [],
          actions: [],
          actionKinds: [],
        };
        const skipped = { ...r, skipWhen: [...r.skipWhen, { conditions: [...extra, above] }] };
        const asked = { ...r, conditions: [...r.conditions, above] };
        return ruleMatches(skipped, f) === ruleMatches(r, f) && ruleMatches(asked, f) === ruleMatches(r, f);
      }),
    );
  });

  it('adding a condition never turns a non-matching rule into a matching one', () => {
    fc.assert(
      fc.property(
        rule,
        condition,
        facts,
        (r, c, f) => !ruleMatches({ ...r, conditions: [...r.conditions, c] }, f) || ruleMatches(r, f),
      ),
    );
  });

  it('value_above: gwei g is wei g × 1e9; the comparison is strict', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 12n }), amount, (g, v) => {
        const viaGwei = ruleMatches(
          {
            conditions: [
              {
                type: 'value_above',
                thresholdGwei: String(g),
                chains: [],
                addresses: [],
                selectors: [],
                intentTypes: [],
                actions: [],
                actionKinds: [],
              },
            ],
            riskTier: 1,
            skipWhen: [],
            requireWhen: [],
          },
          { valueWei: v },
        );
        return viaGwei === v > g * 1_000_000_000n;
      }),
    );
  });

  it('EVM hex and bech32 address, chain and selector comparisons ignore case', () => {
    fc.assert(
      fc.property(policy, facts, fc.integer({ min: 0, max: 2 ** 30 - 1 }), (p, f, mask) => {
        const g: RuleFacts = {
          ...f,
          // bech32 is one case throughout (mixed case is not an address): all upper or as is
          ...(f.to !== undefined
            ? { to: f.to.startsWith('0x') ? flipCase(f.to, mask) : mask & 1 ? f.to.toUpperCase() : f.to }
            : {}),
          ...(f.chain !== undefined ? { chain: flipCase(f.chain, mask) } : {}),
          ...(f.selector !== undefined ? { selector: flipCase(f.selector, mask) } : {}),
        };
        const a = matchApprovalPolicy(p, f);
        const b = matchApprovalPolicy(p, g);
        return a?.ruleIndex === b?.ruleIndex && a?.tier === b?.tier;
      }),
    );
  });
});
