import { streamConfigProblem } from './nats';

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
