import { capsOf, isPlan, wireCaps } from './plan-fns.js';

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

  it('writes unlimited as -1 on the wire', () => {
    expect(wireCaps('enterprise')).toEqual({
      plan: 'enterprise',
      maxVaults: '-1',
      maxSecrets: '-1',
      maxAgents: '-1',
      maxRequestsPerMonth: '-1',
    });
    expect(wireCaps('free').maxAgents).toBe('2');
  });
});
