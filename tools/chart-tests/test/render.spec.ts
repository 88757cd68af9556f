// helm lint and helm template succeed, and every rendered object is valid against the Kubernetes
// OpenAPI schemas (kubernetes-models), for the default values and for values-production.yaml.
import { SERVICES } from './facts';
import {
  type K8sObject,
  REQUIRED_SETS,
  chartDir,
  lintStrict,
  objectName,
  ofKind,
  renderChart,
  runHelm,
  scenarios,
} from './helm';
import { validationErrors } from './validate';

describe.each(scenarios)('chart rendered with $label', ({ args }) => {
  let objects: K8sObject[];
  beforeAll(() => {
    objects = renderChart(args);
  });

  it('passes helm lint --strict without an error, a warning or a refusal', () => {
    expect(lintStrict(args)).toEqual({ status: 0, problems: [] });
  });

  it('renders only objects that validate against the Kubernetes schemas', () => {
    expect(objects.length).toBeGreaterThan(0);
    expect(validationErrors(objects)).toEqual([]);
  });

  it('renders a Deployment, Service, ServiceAccount, Certificate and NetworkPolicy for each of the nine services', () => {
    const expected = SERVICES.map(objectName).sort();
    for (const kind of ['Deployment', 'ServiceAccount', 'Certificate']) {
      const names = ofKind(objects, kind).map((o) => o.metadata.name);
      expect({ kind, names: names.sort() }).toEqual({ kind, names: expected });
    }
    // Two Services each: the ClusterIP one and the headless gRPC one (grpc.headlessServices).
    const services = ofKind(objects, 'Service').map((o) => o.metadata.name);
    expect(services.sort()).toEqual([...expected, ...expected.map((n) => `${n}-grpc`)].sort());
    // Besides one per service: the migration Job's, and one per in-cluster dependency.
    const policies = ofKind(objects, 'NetworkPolicy').map((o) => o.metadata.name);
    expect(policies.filter((n) => expected.includes(n)).sort()).toEqual(expected);
    for (const other of policies.filter((n) => !expected.includes(n)))
      expect(other).toMatch(/^custos-(migrate|(postgres|nats|redis)-clients)$/);
    expect(policies).toContain('custos-migrate');
  });

  it('gives every object a unique kind/name and the release labels', () => {
    const ids = objects.map((o) => `${o.kind}/${o.metadata.name}`);
    expect(new Set(ids).size).toBe(ids.length);
    for (const obj of objects) {
      expect(obj.metadata.labels).toMatchObject({
        'app.kubernetes.io/name': 'custos',
        'app.kubernetes.io/instance': 'custos',
        'app.kubernetes.io/managed-by': 'Helm',
      });
    }
  });

  it('routes the Ingress to the gateway HTTP port', () => {
    const [ingress, ...more] = ofKind(objects, 'Ingress');
    expect(more).toHaveLength(0);
    const backend = ingress!.spec.rules[0].http.paths[0].backend.service;
    expect(backend).toEqual({ name: objectName('gateway'), port: { name: 'http' } });
  });
});

describe('production values', () => {
  it('keep every credential in an existing Secret: the chart renders no Secret', () => {
    const objects = renderChart(scenarios[1]!.args);
    expect(ofKind(objects, 'Secret')).toEqual([]);
    const ingress = ofKind(objects, 'Ingress')[0]!;
    expect(ingress.spec.tls).toEqual([{ hosts: ['custos.example.com'], secretName: 'custos-tls' }]);
    for (const d of ofKind(objects, 'Deployment')) expect(d.spec.replicas).toBeGreaterThanOrEqual(2);
    expect(ofKind(objects, 'PodDisruptionBudget')).toHaveLength(9);
  });
});

describe('helm lint --strict catches what the chart refuses', () => {
  const production = scenarios[1]!.args;

  it('lints clean with the OpenShift example and with every optional object on', () => {
    const everything = [
      '--set',
      'monitoring.serviceMonitor.enabled=true',
      '--set',
      'monitoring.prometheusRule.enabled=true',
      '--set',
      'monitoring.grafanaDashboard.enabled=true',
      '--set',
      'httpRoute.enabled=true',
      '--set',
      'httpRoute.parentRefs[0].name=public',
      '--set',
      'serviceDefaults.autoscaling.enabled=true',
      '--set',
      'redis.sentinel.enabled=true',
      '--set',
      'redis.sentinel.hosts={sentinel-0:26379}',
    ];
    for (const args of [
      [...production, '-f', `${chartDir}/values-openshift.yaml`],
      [...production, ...everything],
    ]) {
      expect(lintStrict(args)).toEqual({ status: 0, problems: [] });
      expect(validationErrors(renderChart(args))).toEqual([]);
    }
  });

  it('reports the refusal of a template (`fail`), which helm 4 lint alone only logs', () => {
    // kms.provider local without kms.allowLocal is refused by a template, not by the schema.
    const lint = lintStrict([...production, '--set', 'kms.provider=local']);
    expect(lint.problems.join('\n')).toMatch(/funcMap fail.*kms: provider/);
    const template = runHelm(['template', 'custos', chartDir, ...production, '--set', 'kms.provider=local']);
    expect(template.status).not.toBe(0);
  });

  it('reports a value the schema rejects, with a non-zero exit', () => {
    const lint = lintStrict([...production, '--set', 'migrations.backoffLimit=-1']);
    expect(lint.status).not.toBe(0);
    expect(lint.problems.join('\n')).toMatch(/backoffLimit/);
  });

  it('reports the default values without the required keys', () => {
    const lint = lintStrict([]);
    expect(lint.problems.join('\n')).toMatch(/TOKEN_SIGNING_KEK/);
  });
});

describe('image registry', () => {
  const withoutRegistry = REQUIRED_SETS.filter(
    (a, i) => !a.startsWith('image.registry=') && !REQUIRED_SETS[i + 1]?.startsWith('image.registry='),
  );

  it('refuses the placeholder registry.example.com, naming docs/images.md', () => {
    expect(withoutRegistry).toHaveLength(REQUIRED_SETS.length - 2);
    for (const args of [withoutRegistry, ['-f', `${chartDir}/values-production.yaml`]]) {
      const { status, stderr } = runHelm(['template', 'custos', chartDir, ...args]);
      expect(status).not.toBe(0);
      expect(stderr).toMatch(
        /image.registry: registry.example.com\/custos is a placeholder.*docs\/images.md/,
      );
    }
  });

  it('renders with images of your own: a registry, none (loaded into the cluster), or a reference per service (skaffold)', () => {
    const image = (args: string[]) =>
      renderChart(args).find((o) => o.kind === 'Deployment' && o.metadata.name === 'custos-audit')!.spec
        .template.spec.containers[0].image;
    expect(image([...withoutRegistry, '--set', 'image.registry=ghcr.io/acme/custos'])).toBe(
      'ghcr.io/acme/custos/custos-audit:0.1.0',
    );
    expect(image([...withoutRegistry, '--set', 'image.registry='])).toBe('custos-audit:0.1.0');
    const refs = SERVICES.flatMap((s) => [
      '--set',
      `services.${s}.image.reference=localhost:5000/custos-${s}:dev`,
    ]);
    expect(image([...withoutRegistry, ...refs])).toBe('localhost:5000/custos-audit:dev');
  });
});

describe('Kubernetes version', () => {
  it('is refused below 1.24, the oldest version the chart supports', () => {
    const { status, stderr } = runHelm([
      'template',
      'custos',
      chartDir,
      ...REQUIRED_SETS,
      '--kube-version',
      '1.23.0',
    ]);
    expect(status).not.toBe(0);
    expect(stderr).toMatch(/kubeVersion|incompatible/i);
  });
});
