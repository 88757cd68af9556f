import { CustosError } from '@custos/service-kit';
import { MAX_DESCRIPTION, parseIpRuleInput } from './ip-rule-fns';

function refusal(fields: Record<string, unknown>): { field?: string; kind: string } {
  try {
    parseIpRuleInput(fields);
  } catch (err) {
    if (err instanceof CustosError) return { kind: err.kind, field: err.field };
    throw err;
  }
  throw new Error('accepted');
}

describe('parseIpRuleInput', () => {
  it('normalises the network and defaults the description', () => {
    expect(parseIpRuleInput({ cidr: '10.1.2.3/8', rule_type: 'allow' })).toEqual({
      cidr: '10.0.0.0/8',
      ruleType: 'allow',
      description: '',
    });
  });

  it('reads the reference name deny as block', () => {
    expect(parseIpRuleInput({ cidr: '::1', rule_type: 'deny', description: 'x' }).ruleType).toBe('block');
  });

  it.each([
    [{ rule_type: 'allow' }, 'cidr'],
    [{ cidr: 42, rule_type: 'allow' }, 'cidr'],
    [{ cidr: '10.0.0.0/40', rule_type: 'allow' }, 'cidr'],
    [{ cidr: 'x'.repeat(1000), rule_type: 'allow' }, 'cidr'],
    [{ cidr: '10.0.0.0/8' }, 'rule_type'],
    [{ cidr: '10.0.0.0/8', rule_type: 'Allow' }, 'rule_type'],
    [{ cidr: '10.0.0.0/8', rule_type: 'allow', description: 5 }, 'description'],
    [{ cidr: '10.0.0.0/8', rule_type: 'allow', description: 'd'.repeat(MAX_DESCRIPTION + 1) }, 'description'],
    [{ cidr: '10.0.0.0/8', rule_type: 'allow', description: 'a\u0000b' }, 'description'],
    [{ cidr: '10.0.0.0/8', rule_type: 'allow', label: 'office' }, 'label'],
  ])('refuses %j naming %s', (fields, field) => {
    expect(refusal(fields)).toEqual({ kind: 'invalid_argument', field });
  });
});
