import { InvalidArgumentError } from '@custos/service-kit';
import { parseRouterKeyLimits } from './router-key-fns';

describe('parseRouterKeyLimits', () => {
  it('accepts absent, null and non-negative integer limits', () => {
    expect(parseRouterKeyLimits({})).toEqual({ maxConcurrentStreams: null, spendCapMicroUsd: null });
    expect(parseRouterKeyLimits({ max_concurrent_streams: null, spend_cap_micro_usd: null })).toEqual({
      maxConcurrentStreams: null,
      spendCapMicroUsd: null,
    });
    expect(parseRouterKeyLimits({ max_concurrent_streams: 0, spend_cap_micro_usd: 5_000_000 })).toEqual({
      maxConcurrentStreams: 0,
      spendCapMicroUsd: 5_000_000,
    });
    expect(parseRouterKeyLimits({ spend_cap_micro_usd: Number.MAX_SAFE_INTEGER }).spendCapMicroUsd).toBe(
      Number.MAX_SAFE_INTEGER,
    );
  });

  it.each([
    [{ max_concurrent_streams: -1 }, 'max_concurrent_streams'],
    [{ max_concurrent_streams: 1.5 }, 'max_concurrent_streams'],
    [{ max_concurrent_streams: '4' }, 'max_concurrent_streams'],
    [{ max_concurrent_streams: 2 ** 31 }, 'max_concurrent_streams'],
    [{ spend_cap_micro_usd: -10 }, 'spend_cap_micro_usd'],
    [{ spend_cap_micro_usd: true }, 'spend_cap_micro_usd'],
    [{ spend_cap_micro_usd: 2 ** 53 }, 'spend_cap_micro_usd'],
    [{ spend_cap_usd: 1 }, 'spend_cap_usd'],
  ])('refuses %j naming %s', (fields, field) => {
    let err: unknown;
    try {
      parseRouterKeyLimits(fields);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidArgumentError);
    expect((err as InvalidArgumentError).field).toBe(field);
  });
});
