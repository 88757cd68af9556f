// helm lint and helm template succeed, and every rendered object is valid against the Kubernetes
// OpenAPI schemas (kubernetes-models), for the default values and for values-production.yaml.
import * as appsV1 from 'kubernetes-models/apps/v1';
import * as batchV1 from 'kubernetes-models/batch/v1';
import * as networkingV1 from 'kubernetes-models/networking.k8s.io/v1';
import * as policyV1 from 'kubernetes-models/policy/v1';
import * as coreV1 from 'kubernetes-models/v1';
import { SERVICES } from './facts';
import {
  type K8sObject,
  REQUIRED_SETS,
  chartDir,
  objectName,
  ofKind,
  renderChart,
  runHelm,
  scenarios,
} from './helm';

type Model = new (data: unknown) => { validate(): void };

// Model classes by apiVersion. A kind the chart renders whose apiVersion or kind is missing here
// fails the test, unless it is listed in UNVALIDATED_KINDS with the reason it cannot be checked.
const MODELS: Record<string, Record<string, unknown>> = {
  v1: coreV1,
  'apps/v1': appsV1,
  'batch/v1': batchV1,
  'networking.k8s.io/v1': networkingV1,
  'policy/v1': policyV1,
};
/**
 * "apiVersion/kind" entries that kubernetes-models cannot validate: CRDs. The cert-manager
 * Certificate is checked field by field in trust.spec.ts.
 */
const UNVALIDATED_KINDS: string[] = ['cert-manager.io/v1/Certificate'];

function validate(obj: K8sObject): void {
  const id = `${obj.apiVersion}/${obj.kind}`;
  if (UNVALIDATED_KINDS.includes(id)) return;
  const model = MODELS[obj.apiVersion]?.[obj.kind] as Model | undefined;
  if (!model) throw new Error(`${id} ${obj.metadata.name}: no kubernetes-models class to validate it with`);
  try {
    new model(obj).validate();
  } catch (err) {
    throw new Error(`${id} ${obj.metadata.name} is invalid: ${(err as Error).message}`);
  }
}

describe.each(scenarios)('chart rendered with $label', ({ args }) => {
  let objects: K8sObject[];
  beforeAll(() => {
    objects = renderChart(args);
  });

  it('passes helm lint --strict', () => {
    const { status, stdout, stderr } = runHelm(['lint', chartDir, '--strict', ...args]);
    expect({ status, out: stdout + stderr }).toEqual({
      status: 0,
      out: expect.stringContaining('0 chart(s) failed'),
    });
  });

  it('renders only objects that validate against the Kubernetes schemas', () => {
    expect(objects.length).toBeGreaterThan(0);
    const errors: string[] = [];
    for (const obj of objects) {
      try {
        validate(obj);
      } catch (err) {
        errors.push((err as Error).message);
      }
    }
    expect(errors).toEqual([]);
  });

  it('renders a Deployment, Service, ServiceAccount, Certificate and NetworkPolicy for each of the nine services', () => {
    const expected = SERVICES.map(objectName).sort();
    for (const kind of ['Deployment', 'Service', 'ServiceAccount', 'Certificate']) {
      const names = ofKind(objects, kind).map((o) => o.metadata.name);
      expect({ kind, names: names.sort() }).toEqual({ kind, names: expected });
    }
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
