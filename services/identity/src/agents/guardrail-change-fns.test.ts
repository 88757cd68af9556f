import { DEFAULT_AGENT_SETTINGS } from './agent-fns';
import type { AgentSettings } from './agent-types';
import {
  canonicalJson,
  compareAgentGuardrails,
  guardrailChangeHash,
  guardrailJson,
  needsApproval,
} from './guardrail-change-fns';

const base: AgentSettings = { ...DEFAULT_AGENT_SETTINGS, txMaxValueEth: '1' };
const w = (s: Partial<AgentSettings>): AgentSettings => ({ ...base, ...s });

describe('compareAgentGuardrails', () => {
  it.each<[string, Partial<AgentSettings>, string]>([
    ['nothing moves', {}, 'same'],
    ['a lower value cap', { txMaxValueEth: '0.5' }, 'narrow'],
    ['a higher value cap', { txMaxValueEth: '2' }, 'widen'],
    ['a cleared value cap', { txMaxValueEth: null }, 'widen'],
    ['a signing path opened', { rawSigningEnabled: true }, 'widen'],
    ['a TEE requirement added', { intentsRequireTee: true }, 'narrow'],
    ['screening off to deny', { addressScreeningPolicy: { mode: 'deny' } }, 'narrow'],
    ['a stablecoin cap set', { usdcDailyLimitUsd: 100 }, 'narrow'],
    ['enforce instead of log', { executionGuardrails: { enforcement: 'enforce' } }, 'narrow'],
    ['lower cap and a path opened', { txMaxValueEth: '0.5', messageSigningEnabled: true }, 'mixed'],
    ['an allowlist set where any address went', { txToAllowlist: ['0xb'] }, 'narrow'],
    [
      'approval rules added',
      { actionApprovalPolicy: { rules: [{ conditions: [{ type: 'always' }], riskTier: 1 }] } },
      'narrow',
    ],
  ])('%s: %s', (_name, change, expected) => {
    expect(compareAgentGuardrails(base, w(change))).toBe(expected);
  });

  it('takes removing every approval rule for a widening and changing one for neither', () => {
    const rules = (tier: number) => ({
      rules: [{ conditions: [{ type: 'always' as const }], riskTier: tier }],
    });
    const withRules = w({ actionApprovalPolicy: rules(1) });
    expect(compareAgentGuardrails(withRules, w({ actionApprovalPolicy: null }))).toBe('widen');
    expect(compareAgentGuardrails(withRules, w({ actionApprovalPolicy: rules(2) }))).toBe('mixed');
    expect(compareAgentGuardrails(withRules, w({ actionApprovalPolicy: rules(1) }))).toBe('same');
  });

  it('holds widen and mixed edits only', () => {
    expect(['same', 'narrow', 'widen', 'mixed'].filter((c) => needsApproval(c as 'same'))).toEqual([
      'widen',
      'mixed',
    ]);
  });
});

describe('guardrailChangeHash', () => {
  it('binds the agent and the guardrails before and after the edit, whatever the key order', () => {
    const before = guardrailJson(w({ txMaxValueEth: '1' }));
    const after = guardrailJson(w({ txMaxValueEth: '2' }));
    const reordered = Object.fromEntries(Object.entries(after).reverse());
    const agent = '6f1c3c1e-6b0e-4a53-8d59-6a0b9d0f4d11';
    const h = guardrailChangeHash(agent, before, after);
    expect(h).toMatch(/^[0-9a-f]{64}$/);
    expect(guardrailChangeHash(agent, before, reordered)).toBe(h);
    expect(guardrailChangeHash(agent.toUpperCase(), before, after)).toBe(h);
    expect(guardrailChangeHash(agent, before, guardrailJson(w({ txMaxValueEth: '3' })))).not.toBe(h);
    expect(guardrailChangeHash('7f1c3c1e-6b0e-4a53-8d59-6a0b9d0f4d11', before, after)).not.toBe(h);
    // The same end state from guardrails that moved since (a narrowing meanwhile): another change.
    expect(guardrailChangeHash(agent, guardrailJson(w({ txMaxValueEth: '0.01' })), after)).not.toBe(h);
  });

  it('keeps only guardrail fields in a revision side', () => {
    const j = guardrailJson(w({ name: 'x' } as Partial<AgentSettings>));
    expect(j).toHaveProperty('tx_max_value_eth', '1');
    expect(j).not.toHaveProperty('scopes');
    expect(j).not.toHaveProperty('token_ttl_seconds');
    expect(canonicalJson({ b: 1, a: [{ d: 2, c: null }] })).toBe('{"a":[{"c":null,"d":2}],"b":1}');
  });
});
