import type { RuleMatch } from '@custos/approval-rules';
import type { TxRecord } from '../transactions/tx-types.js';
import { approvedCodesOf, atTier, withGuardrailViolations, withSanctionsHit } from './hold-reasons.js';

// The match a transaction is held with when a sanctions hit or guardrail violations (approve mode)
// come on top of an approval rule: the stricter of both, still decidable.

const consensus = (types: string[]): RuleMatch => ({
  tier: 1,
  ruleIndex: 0,
  rule: { conditions: [], riskTier: 1, skipWhen: [], requireWhen: [] },
  ruleJson: { risk_tier: 1 },
  requirement: {
    minApprovals: 2,
    requiredRoles: ['admin'],
    perRoleMinimums: {},
    requireCredentialTypes: types,
    selfApprovalAllowed: false,
  },
});
const hit = { hit: true as const, list: 'sdn', family: 'evm' as const, chain: 'anvil', address: '0xabc' };
const violation = {
  reasonCode: 'tx_max_value_exceeded' as const,
  field: 'tx_max_value',
  detail: 'd',
  always: false,
};

describe('hold reasons', () => {
  it('a sanctions hit keeps a rule’s consensus at tier 3, with only the credentials a tier-3 vote proves', () => {
    const m = withSanctionsHit(consensus(['password', 'totp']), hit);
    expect(m.tier).toBe(3);
    expect(m.requirement).toMatchObject({
      minApprovals: 2,
      requiredRoles: ['admin'],
      requireCredentialTypes: ['totp'],
    });
    expect(m.ruleJson).toMatchObject({ sanctions_hit: { reason: 'sanctions_hit', address: '0xabc' } });
    // A password-only requirement cannot be met at tier 3: it goes (the tier asks a TOTP code anyway).
    expect(withSanctionsHit(consensus(['password']), hit).requirement?.requireCredentialTypes).toEqual([]);
    // Without a rule: the hit alone, one human at tier 3.
    expect(withSanctionsHit(undefined, hit)).toMatchObject({
      tier: 3,
      ruleJson: { reason: 'sanctions_hit' },
    });
  });

  it('guardrail violations raise the tier to 2 and are shown beside the rule', () => {
    const m = withGuardrailViolations(consensus(['password']), [violation]);
    expect(m).toMatchObject({ tier: 2, requirement: { requireCredentialTypes: ['password'] } });
    expect(m.ruleJson['guardrail_violations']).toEqual([
      { reason_code: 'tx_max_value_exceeded', field: 'tx_max_value', detail: 'd' },
    ]);
    expect(atTier(consensus([]), 1).tier).toBe(1);
  });

  it('reads the approved guardrail codes back from the held row', () => {
    const row = (details: Record<string, string>) => ({ details }) as unknown as TxRecord;
    expect(approvedCodesOf(row({ held_guardrail_codes: 'tx_max_value_exceeded,to_not_allowed' }))).toEqual([
      'tx_max_value_exceeded',
      'to_not_allowed',
    ]);
    expect(approvedCodesOf(row({}))).toEqual([]);
    expect(approvedCodesOf(undefined)).toEqual([]);
  });
});
