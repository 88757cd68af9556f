import { errors } from '@nats-io/nats-core';
import { publishBackoffMs, publishFailureReason } from './outbox-publish-failure.js';

describe('publishFailureReason', () => {
  it('classes the refusals of a full stream, whatever the limit', () => {
    const api = (description: string) => Object.assign(new Error(description), { name: 'JetStreamApiError' });
    expect(publishFailureReason(api('maximum bytes exceeded'))).toBe('stream_full');
    expect(publishFailureReason(api('maximum messages exceeded'))).toBe('stream_full');
    expect(publishFailureReason(api('maximum messages per subject exceeded'))).toBe('stream_full');
    expect(publishFailureReason(api('insufficient resources'))).toBe('stream_full');
  });

  it('finds no responders and timeouts under the wrapper nats.js puts around them', () => {
    const noResponders = new errors.RequestError('no responders', {
      cause: new errors.NoRespondersError('custos.events.x'),
    });
    expect(publishFailureReason(new Error('jetstream is not enabled', { cause: noResponders }))).toBe(
      'no_responders',
    );
    expect(publishFailureReason(new errors.TimeoutError())).toBe('timeout');
  });

  it('puts anything else in other', () => {
    expect(publishFailureReason(new Error('Permissions Violation for Publish'))).toBe('other');
    expect(publishFailureReason('a string')).toBe('other');
    expect(publishFailureReason(undefined)).toBe('other');
  });
});

describe('publishBackoffMs', () => {
  it('doubles from the base per consecutive failure, up to the cap', () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7, 100].map((n) => publishBackoffMs(n, 500, 30_000))).toEqual([
      0, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000,
    ]);
  });
});
