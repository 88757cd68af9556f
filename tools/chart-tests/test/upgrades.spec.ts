// Upgrades: the migration Job's deadline fits `helm upgrade --timeout`, pods roll when a Secret
// changes (a checksum for the chart's Secrets, the secretReloader annotation for the operator's),
// and docs/deployment.md says how to upgrade and roll back.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { SERVICES } from './facts';
import {
  type Json,
  type K8sObject,
  REQUIRED_SETS,
  TEST_SIGNING_KEK,
  named,
  objectName,
  ofKind,
  renderChart,
  repoRoot,
  scenarios,
  sets,
} from './helm';

const production = scenarios[1]!.args;
const ANNOTATION = 'secret.reloader.stakater.com/reload';
/** Helm's default --timeout, in seconds. */
const HELM_DEFAULT_TIMEOUT = 300;

/** Every Secret a Deployment's pods read, found in the rendered object itself. */
function secretsReadBy(deployment: K8sObject): Set<string> {
  const pod = deployment.spec.template.spec;
  const names = new Set<string>();
  for (const c of pod.containers) {
    for (const e of c.env ?? []) if (e.valueFrom?.secretKeyRef) names.add(e.valueFrom.secretKeyRef.name);
    for (const f of c.envFrom ?? []) if (f.secretRef) names.add(f.secretRef.name);
  }
  for (const v of pod.volumes ?? []) if (v.secret) names.add(v.secret.secretName);
  return names;
}

/** The Secrets of the operator's a Deployment reads: not the chart's, not the mesh certificate. */
function expectedReloadList(objects: K8sObject[], deployment: K8sObject): string {
  const rendered = new Set(ofKind(objects, 'Secret').map((s) => s.metadata.name));
  const meshTls = deployment.spec.template.spec.volumes.find((v: Json) => v.name === 'mesh-tls').secret
    .secretName;
  return [...secretsReadBy(deployment)]
    .filter((n) => !rendered.has(n) && n !== meshTls)
    .sort()
    .join(',');
}

describe('migration Job deadline and helm --timeout', () => {
  it('the default deadline ends before helm’s default 5m timeout gives up on the hook', () => {
    const job = named(renderChart(REQUIRED_SETS), 'Job', 'custos-migrate');
    expect(job.spec.activeDeadlineSeconds).toBe(270);
    expect(job.spec.activeDeadlineSeconds).toBeLessThan(HELM_DEFAULT_TIMEOUT);
  });

  it('values-production.yaml’s 900 s go with --timeout 20m, and the docs name both pairs', () => {
    const job = named(renderChart(production), 'Job', 'custos-migrate');
    expect(job.spec.activeDeadlineSeconds).toBe(900);
    const prodFile = readFileSync(path.join(repoRoot, 'charts/custos/values-production.yaml'), 'utf8');
    expect(prodFile).toContain('--timeout 20m');
    const docs = readFileSync(path.join(repoRoot, 'docs/deployment.md'), 'utf8');
    for (const words of ['270', '--timeout 20m', '900', 'activeDeadlineSeconds'])
      expect(docs).toContain(words);
  });
});

describe('restarts on changed Secrets', () => {
  it.each([
    ['tokens.signingKek', Buffer.from('chart-tests:another-token-kek!!!').toString('base64'), ['identity']],
    ['audit.hmacKey', Buffer.from('chart-tests:another-audit-key!!!').toString('base64'), ['audit']],
    [
      'webhooks.secretKey',
      Buffer.from('chart-tests:another-hook-key!!!!').toString('base64'),
      ['webhook-dispatcher'],
    ],
    ['redis.users.policy.password', 'chart-tests-another-redis-policy', ['policy']],
    ['nats.users.billing.password', 'chart-tests-another-nats-billing', ['billing']],
  ])('a changed %s rolls exactly the pods that read it', (key, value, readers) => {
    const before = renderChart(REQUIRED_SETS);
    expect(value).not.toBe(TEST_SIGNING_KEK);
    const after = renderChart([...REQUIRED_SETS, ...sets(`${key}=${value}`)]);
    const sum = (objects: K8sObject[], s: string) =>
      named(objects, 'Deployment', objectName(s)).spec.template.metadata.annotations['checksum/secret'];
    const rolled = SERVICES.filter((s) => sum(after, s) !== sum(before, s));
    expect(rolled).toEqual(readers);
  });

  it('a Sentinel password given inline rolls every service that uses Redis', () => {
    const base = [...REQUIRED_SETS, ...sets('redis.sentinel.enabled=true', 'redis.sentinel.hosts={s:26379}')];
    const sum = (objects: K8sObject[], s: string) =>
      named(objects, 'Deployment', objectName(s)).spec.template.metadata.annotations['checksum/secret'];
    const a = renderChart([...base, ...sets('redis.sentinel.password=one-password')]);
    const b = renderChart([...base, ...sets('redis.sentinel.password=another-password')]);
    expect(SERVICES.filter((s) => sum(a, s) !== sum(b, s))).toEqual(SERVICES);
  });

  it('secretReloader is off by default', () => {
    for (const d of ofKind(
      renderChart(production.concat(sets('secretReloader.enabled=false'))),
      'Deployment',
    ))
      expect(d.metadata.annotations?.[ANNOTATION]).toBeUndefined();
    for (const d of ofKind(renderChart(REQUIRED_SETS), 'Deployment'))
      expect(d.metadata.annotations?.[ANNOTATION]).toBeUndefined();
  });

  it.each(SERVICES)(
    'values-production.yaml: %s’s annotation lists exactly the Secrets of yours it reads',
    (service) => {
      const objects = renderChart(production);
      const deployment = named(objects, 'Deployment', objectName(service));
      const expected = expectedReloadList(objects, deployment);
      expect(expected).toContain(`custos-${service}-credentials`);
      expect(deployment.metadata.annotations[ANNOTATION]).toBe(expected);
      expect(expected).not.toContain(`custos-${service}-tls`);
    },
  );

  it('default values with a few existing Secrets: those are listed, the chart’s own Secrets are not', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      ...sets(
        'secretReloader.enabled=true',
        'tokens.existingSecret=my-tokens',
        'redis.users.gateway.existingSecret=gw-redis',
        'services.gateway.envFrom[0].secretRef.name=gw-extra',
        'services.gateway.extraVolumes[0].name=extra',
        'services.gateway.extraVolumes[0].secret.secretName=gw-files',
        'services.gateway.extraVolumeMounts[0].name=extra',
        'services.gateway.extraVolumeMounts[0].mountPath=/etc/extra',
      ),
    ]);
    const gateway = named(objects, 'Deployment', objectName('gateway'));
    expect(gateway.metadata.annotations[ANNOTATION]).toBe('gw-extra,gw-files,gw-redis');
    expect(expectedReloadList(objects, gateway)).toBe('gw-extra,gw-files,gw-redis');
    const identity = named(objects, 'Deployment', objectName('identity'));
    expect(identity.metadata.annotations[ANNOTATION]).toBe('my-tokens');
    // A service that reads only the chart's Secrets gets no annotation.
    expect(
      named(objects, 'Deployment', objectName('policy')).metadata.annotations?.[ANNOTATION],
    ).toBeUndefined();
  });
});

describe('docs/deployment.md on upgrades and rollbacks', () => {
  const docs = readFileSync(path.join(repoRoot, 'docs/deployment.md'), 'utf8');
  it('has a rollback section that says what helm rollback does not undo', () => {
    const section = docs.slice(docs.indexOf('### Rolling back'));
    expect(section.length).toBeGreaterThan(500);
    for (const words of ['forward-only', 'helm rollback', 'expand', 'contract', 'backup', 'schema'])
      expect({ words, found: section.toLowerCase().includes(words.toLowerCase()) }).toEqual({
        words,
        found: true,
      });
  });
});
