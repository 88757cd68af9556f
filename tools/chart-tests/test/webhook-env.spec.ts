// The webhook-dispatcher's environment: WEBHOOK_SECRET_KEY required, only by Secret reference and
// only on the webhook-dispatcher; its delivery rules (allowed CIDRs, plain HTTP) from `webhooks`;
// REDIS_URL like the audit service, for the token revocations it checks.
import { SERVICES } from './facts';
import {
  type Json,
  type K8sObject,
  REQUIRED_SETS,
  TEST_WEBHOOK_KEY,
  named,
  objectName,
  ofKind,
  renderChart,
  runHelm,
  chartDir,
  release,
  scenarios,
} from './helm';

const SERVICE = 'webhook-dispatcher';
/** The variables only the webhook-dispatcher may get. */
const WEBHOOK_ONLY = ['WEBHOOK_SECRET_KEY', 'WEBHOOK_ALLOWED_CIDRS', 'WEBHOOK_ALLOW_HTTP'];

function envOf(objects: K8sObject[], service: string): Map<string, Json> {
  const [container] = named(objects, 'Deployment', objectName(service)).spec.template.spec.containers;
  return new Map((container.env ?? []).map((e: Json) => [e.name, e]));
}

/** The value a secretKeyRef resolves to, when it names a Secret the chart renders. */
function renderedSecretValue(objects: K8sObject[], ref: { name: string; key: string }): string | undefined {
  const secret = ofKind(objects, 'Secret').find((s) => s.metadata.name === ref.name);
  const data = secret?.data?.[ref.key];
  return data === undefined ? undefined : Buffer.from(data, 'base64').toString('utf8');
}

const withoutWebhookKey = REQUIRED_SETS.filter(
  (s, i, all) => !s.startsWith('webhooks.') && all[i + 1]?.startsWith('webhooks.') !== true,
);

function template(args: string[]) {
  return runHelm(['template', release.name, chartDir, '--namespace', release.namespace, ...args]);
}

const [defaults, production] = scenarios;

describe.each([
  { ...defaults!, keyRef: { name: 'custos-env', key: 'webhook-secret-key' }, managed: true },
  { ...production!, keyRef: { name: 'custos-webhooks', key: 'webhook-secret-key' }, managed: false },
])('webhook-dispatcher env rendered with $label', ({ args, keyRef, managed }) => {
  let objects: K8sObject[];
  let env: Map<string, Json>;
  beforeAll(() => {
    objects = renderChart(args);
    env = envOf(objects, SERVICE);
  });

  it('WEBHOOK_SECRET_KEY comes only from a Secret reference', () => {
    expect(env.get('WEBHOOK_SECRET_KEY')).toEqual({
      name: 'WEBHOOK_SECRET_KEY',
      valueFrom: { secretKeyRef: keyRef },
    });
    if (managed) expect(renderedSecretValue(objects, keyRef)).toBe(TEST_WEBHOOK_KEY);
    else expect(ofKind(objects, 'Secret').map((s) => s.metadata.name)).not.toContain('custos-env');
  });

  it('REDIS_URL is its own (its Redis user), not the audit service’s', () => {
    expect(env.get('REDIS_URL')?.valueFrom?.secretKeyRef).toEqual({
      name: 'custos-webhook-dispatcher-credentials',
      key: 'redis-url',
    });
    expect(env.get('REDIS_URL').valueFrom).not.toEqual(envOf(objects, 'audit').get('REDIS_URL').valueFrom);
  });

  it('deliveries default to public addresses over HTTPS', () => {
    expect(env.has('WEBHOOK_ALLOWED_CIDRS')).toBe(false);
    expect(env.get('WEBHOOK_ALLOW_HTTP')).toEqual({ name: 'WEBHOOK_ALLOW_HTTP', value: 'false' });
  });

  it.each(SERVICES.filter((s) => s !== SERVICE))('%s gets no webhook setting', (service) => {
    const other = envOf(objects, service);
    expect(WEBHOOK_ONLY.filter((n) => other.has(n))).toEqual([]);
  });
});

describe('webhooks values', () => {
  const render = (...sets: string[]) => renderChart([...REQUIRED_SETS, ...sets.flatMap((s) => ['--set', s])]);

  it('an existing Secret wins over the inline key, which then stays out of the chart’s Secret', () => {
    const objects = render('webhooks.existingSecret=my-webhooks', 'webhooks.existingSecretKey=k');
    expect(envOf(objects, SERVICE).get('WEBHOOK_SECRET_KEY').valueFrom.secretKeyRef).toEqual({
      name: 'my-webhooks',
      key: 'k',
    });
    for (const secret of ofKind(objects, 'Secret'))
      expect(Object.keys(secret.data ?? {})).not.toContain('webhook-secret-key');
  });

  it('accepts the key from services.webhook-dispatcher.secretEnv instead', () => {
    const objects = renderChart([
      ...withoutWebhookKey,
      '--set',
      'services.webhook-dispatcher.secretEnv.WEBHOOK_SECRET_KEY.name=own-key',
      '--set',
      'services.webhook-dispatcher.secretEnv.WEBHOOK_SECRET_KEY.key=key',
    ]);
    expect(envOf(objects, SERVICE).get('WEBHOOK_SECRET_KEY').valueFrom.secretKeyRef).toEqual({
      name: 'own-key',
      key: 'key',
    });
  });

  it('refuses to render without a key, naming the value to set', () => {
    expect(withoutWebhookKey).not.toContain(expect.stringMatching(/^webhooks\./));
    const r = template(withoutWebhookKey);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(
      'webhooks: the webhook-dispatcher service needs WEBHOOK_SECRET_KEY: set webhooks.existingSecret (recommended) or webhooks.secretKey',
    );
    expect(r.stderr).toContain('openssl rand -base64 32');
  });

  it('refuses a key that is not base64 of 32 bytes', () => {
    const r = template([...withoutWebhookKey, '--set', 'webhooks.secretKey=short']);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/secretKey/);
  });

  it('allowedCidrs are joined with commas and allowHttp is passed on', () => {
    const env = envOf(
      render('webhooks.allowedCidrs={10.20.0.0/16,fd00::/8}', 'webhooks.allowHttp=true'),
      SERVICE,
    );
    expect(env.get('WEBHOOK_ALLOWED_CIDRS')).toEqual({
      name: 'WEBHOOK_ALLOWED_CIDRS',
      value: '10.20.0.0/16,fd00::/8',
    });
    expect(env.get('WEBHOOK_ALLOW_HTTP')).toEqual({ name: 'WEBHOOK_ALLOW_HTTP', value: 'true' });
  });

  it('the tuning variables are set through services.webhook-dispatcher.env', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      '--set-string',
      'services.webhook-dispatcher.env.WEBHOOK_CONCURRENCY=32',
      '--set-string',
      'services.webhook-dispatcher.env.WEBHOOK_DNS_SERVERS=10.0.0.10:53',
    ]);
    const env = envOf(objects, SERVICE);
    expect(env.get('WEBHOOK_CONCURRENCY')?.value).toBe('32');
    expect(env.get('WEBHOOK_DNS_SERVERS')?.value).toBe('10.0.0.10:53');
  });
});
