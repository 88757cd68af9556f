// The approvals service's environment: its expiry settings from `approvals` (blank: the service's
// defaults), only on approvals; its own Redis user's REDIS_URL (it verifies callers' tokens and
// reads their revocations) and identity as its only peer.
import { SERVICES } from './facts';
import { REQUIRED_SETS, renderChart, runHelm, chartDir, release, scenarios, serviceEnv } from './helm';

const APPROVALS_ONLY = ['APPROVAL_TTL_SECONDS', 'APPROVAL_SWEEP_INTERVAL_MS'];

describe.each(scenarios)('approvals env rendered with $label', ({ args }) => {
  it('leaves the expiry settings to the service by default and gives approvals Redis and identity', () => {
    const objects = renderChart(args);
    const env = serviceEnv(objects, 'approvals');
    for (const name of APPROVALS_ONLY) expect({ name, has: env.has(name) }).toEqual({ name, has: false });
    expect(env.get('REDIS_URL')).toEqual({
      name: 'REDIS_URL',
      valueFrom: { secretKeyRef: { name: expect.stringContaining('approvals'), key: 'redis-url' } },
    });
    expect(env.get('IDENTITY_ADDR')).toMatchObject({
      value: expect.stringMatching(/identity-grpc\.custos\.svc\.cluster\.local:50051$/),
    });
    expect([...env.keys()].filter((k) => k.endsWith('_ADDR'))).toEqual(['IDENTITY_ADDR']);
  });
});

describe('approvals values', () => {
  it('sets APPROVAL_TTL_SECONDS and APPROVAL_SWEEP_INTERVAL_MS on approvals only', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      '--set',
      'approvals.ttlSeconds=3600',
      '--set',
      'approvals.sweepIntervalMs=1000',
    ]);
    const env = serviceEnv(objects, 'approvals');
    expect(env.get('APPROVAL_TTL_SECONDS')).toEqual({ name: 'APPROVAL_TTL_SECONDS', value: '3600' });
    expect(env.get('APPROVAL_SWEEP_INTERVAL_MS')).toEqual({
      name: 'APPROVAL_SWEEP_INTERVAL_MS',
      value: '1000',
    });
    for (const service of SERVICES.filter((s) => s !== 'approvals'))
      for (const name of APPROVALS_ONLY)
        expect({ service, name, has: serviceEnv(objects, service).has(name) }).toEqual({
          service,
          name,
          has: false,
        });
  });

  it('refuses a TTL below a minute or a sweep interval that is not a number (values schema)', () => {
    for (const set of ['approvals.ttlSeconds=10', 'approvals.sweepIntervalMs=often']) {
      const r = runHelm([
        'template',
        release.name,
        chartDir,
        '--namespace',
        release.namespace,
        ...REQUIRED_SETS,
        '--set',
        set,
      ]);
      expect({ set, status: r.status }).toEqual({ set, status: 1 });
      expect(r.stderr).toMatch(/approvals/);
    }
  });
});
