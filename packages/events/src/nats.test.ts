import { PermissionViolationError } from '@nats-io/nats-core';
import { isRefusedStreamUpdate, streamConfigProblem } from './nats';

describe('streamConfigProblem: what a service refuses to publish into', () => {
  const subject = 'custos.events.>';
  it('accepts the stream a service creates', () => {
    expect(streamConfigProblem({ subjects: [subject], allow_rollup_hdrs: false }, subject)).toBeUndefined();
  });
  it('refuses a stream that lets a publisher purge it with Nats-Rollup, is sealed, or lacks the prefix', () => {
    expect(streamConfigProblem({ subjects: [subject], allow_rollup_hdrs: true }, subject)).toMatch(/Rollup/);
    expect(streamConfigProblem({ subjects: [subject], sealed: true }, subject)).toMatch(/sealed/);
    expect(streamConfigProblem({ subjects: ['other.>'] }, subject)).toMatch(/do not include custos.events/);
  });
});

describe('isRefusedStreamUpdate: the one permissions violation a secured install expects', () => {
  const parse = (line: string) => PermissionViolationError.parse(line)!;
  it('is the refused update of this stream, as the server words it', () => {
    const err = parse('Permissions Violation for Publish to "$JS.API.STREAM.UPDATE.CUSTOS_EVENTS"');
    expect(isRefusedStreamUpdate(err, 'CUSTOS_EVENTS')).toBe(true);
  });
  it('is not another stream, another API call, a subscription, or another error', () => {
    const update = parse('Permissions Violation for Publish to "$JS.API.STREAM.UPDATE.OTHER"');
    expect(isRefusedStreamUpdate(update, 'CUSTOS_EVENTS')).toBe(false);
    const del = parse('Permissions Violation for Publish to "$JS.API.STREAM.DELETE.CUSTOS_EVENTS"');
    expect(isRefusedStreamUpdate(del, 'CUSTOS_EVENTS')).toBe(false);
    const sub = parse('Permissions Violation for Subscription to "$JS.API.STREAM.UPDATE.CUSTOS_EVENTS"');
    expect(isRefusedStreamUpdate(sub, 'CUSTOS_EVENTS')).toBe(false);
    const publish = parse('Permissions Violation for Publish to "custos.events.vault.created"');
    expect(isRefusedStreamUpdate(publish, 'CUSTOS_EVENTS')).toBe(false);
    expect(isRefusedStreamUpdate(new Error('$JS.API.STREAM.UPDATE.CUSTOS_EVENTS'), 'CUSTOS_EVENTS')).toBe(
      false,
    );
  });
});
