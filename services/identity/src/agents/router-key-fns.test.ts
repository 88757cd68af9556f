import { InvalidArgumentError } from '@custos/service-kit';
import { checkRouterKeyLimits } from './router-key-fns';

describe('checkRouterKeyLimits', () => {
  it('accepts absent and non-negative integer limits', () => {
    const none = { maxConcurrentStreams: null, spendCapMicroUsd: null };
    expect(checkRouterKeyLimits(none)).toEqual(none);
    const set = { maxConcurrentStreams: 0, spendCapMicroUsd: Number.MAX_SAFE_INTEGER };
    expect(checkRouterKeyLimits(set)).toEqual(set);
  });

  it.each([
    [{ maxConcurrentStreams: -1, spendCapMicroUsd: null }, 'max_concurrent_streams'],
    [{ maxConcurrentStreams: 1.5, spendCapMicroUsd: null }, 'max_concurrent_streams'],
    [{ maxConcurrentStreams: 2 ** 31, spendCapMicroUsd: null }, 'max_concurrent_streams'],
    [{ maxConcurrentStreams: null, spendCapMicroUsd: -10 }, 'spend_cap_micro_usd'],
    [{ maxConcurrentStreams: null, spendCapMicroUsd: 2 ** 53 }, 'spend_cap_micro_usd'],
  ])('refuses %j naming %s', (limits, field) => {
    let err: unknown;
    try {
      checkRouterKeyLimits(limits);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidArgumentError);
    expect((err as InvalidArgumentError).field).toBe(field);
  });
});
