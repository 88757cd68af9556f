import { CustosError } from '@custos/service-kit';
import { MAX_DESCRIPTION, checkIpRuleInput } from './ip-rule-fns';
import type { IpRuleRequest } from './ip-rule-types';

function refusal(r: IpRuleRequest): { field?: string; kind: string } {
  try {
    checkIpRuleInput(r);
  } catch (err) {
    if (err instanceof CustosError) return { kind: err.kind, field: err.field };
    throw err;
  }
  throw new Error('accepted');
}

describe('checkIpRuleInput', () => {
  it('normalises the network', () => {
    expect(checkIpRuleInput({ cidr: '10.1.2.3/8', ruleType: 'allow', description: '' })).toEqual({
      cidr: '10.0.0.0/8',
      ruleType: 'allow',
      description: '',
    });
    expect(checkIpRuleInput({ cidr: '2001:DB8::1', ruleType: 'block', description: 'x' }).cidr).toBe(
      '2001:db8::1/128',
    );
  });

  // The gateway refuses wrong types, unknown fields and reads `deny` as `block`; these are the
  // rules a direct caller meets.
  it.each([
    [{ cidr: '', ruleType: 'allow', description: '' }, 'cidr'],
    [{ cidr: '10.0.0.0/40', ruleType: 'allow', description: '' }, 'cidr'],
    [{ cidr: 'x'.repeat(1000), ruleType: 'allow', description: '' }, 'cidr'],
    [{ cidr: '10.0.0.0/8', ruleType: '', description: '' }, 'rule_type'],
    [{ cidr: '10.0.0.0/8', ruleType: 'deny', description: '' }, 'rule_type'],
    [{ cidr: '10.0.0.0/8', ruleType: 'allow', description: 'd'.repeat(MAX_DESCRIPTION + 1) }, 'description'],
    [{ cidr: '10.0.0.0/8', ruleType: 'allow', description: 'a\u0000b' }, 'description'],
  ])('refuses %j naming %s', (r, field) => {
    expect(refusal(r)).toEqual({ kind: 'invalid_argument', field });
  });
});
