import { orgPlanOf } from '../plans/plan-fns.js';
import { orgLimitsMessage } from './billing-grpc.js';

describe('billing wire encoding', () => {
  it('writes unlimited as -1 and caps as decimal strings', () => {
    expect(orgLimitsMessage(orgPlanOf('enterprise'))).toEqual({
      plan: 'enterprise',
      maxVaults: '-1',
      maxSecrets: '-1',
      maxAgents: '-1',
      maxRequestsPerMonth: '-1',
    });
    expect(orgLimitsMessage(orgPlanOf('free'))).toEqual({
      plan: 'free',
      maxVaults: '3',
      maxSecrets: '50',
      maxAgents: '2',
      maxRequestsPerMonth: '1000',
    });
  });
});
