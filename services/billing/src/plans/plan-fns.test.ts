import { capsOf, isPlan, orgPlanOf } from './plan-fns.js';

describe('plans', () => {
  it('has the caps DECISIONS.md lists', () => {
    expect(capsOf('free')).toEqual({ vaults: 3, secrets: 50, agents: 2, requestsPerMonth: 1000 });
    expect(capsOf('pro')).toEqual({ vaults: 25, secrets: 500, agents: 10, requestsPerMonth: 25000 });
    expect(capsOf('business')).toEqual({ vaults: 100, secrets: 5000, agents: 50, requestsPerMonth: 100000 });
    expect(capsOf('enterprise')).toEqual({
      vaults: null,
      secrets: null,
      agents: null,
      requestsPerMonth: null,
    });
  });

  it('knows exactly the four plans', () => {
    expect(['free', 'pro', 'business', 'enterprise'].every(isPlan)).toBe(true);
    expect(['', 'Free', 'gold', 'enterprise '].some(isPlan)).toBe(false);
  });

  it('pairs a plan with its caps', () => {
    expect(orgPlanOf('pro')).toEqual({ plan: 'pro', caps: capsOf('pro') });
  });
});
