// Client-side balancing of gRPC (grpc.headlessServices): a headless Service per service, the peers'
// <PEER>_ADDR as dns:/// targets on it, its DNS names in the certificates, NetworkPolicies by pod
// selector (so unchanged), and the HorizontalPodAutoscaler option (serviceDefaults.autoscaling).
import { GRPC_PORTS, PEER_ADDRS, SERVICES, serviceOfAddr } from './facts';
import {
  type Json,
  REQUIRED_SETS,
  named,
  objectName,
  ofKind,
  release,
  renderChart,
  renderFailure,
  scenarios,
  serviceEnv,
  sets,
} from './helm';
import { validationErrors } from './validate';

const production = scenarios[1]!.args;

describe.each(scenarios)('headless gRPC Services ($label)', ({ args }) => {
  it.each(SERVICES)('%s: a headless Service on the grpc port that selects exactly its pods', (service) => {
    const objects = renderChart(args);
    const headless = named(objects, 'Service', `${objectName(service)}-grpc`);
    const clusterIp = named(objects, 'Service', objectName(service));
    expect(headless.spec).toEqual({
      clusterIP: 'None',
      selector: clusterIp.spec.selector,
      ports: [
        { name: 'grpc', port: GRPC_PORTS[service], targetPort: 'grpc', protocol: 'TCP', appProtocol: 'grpc' },
      ],
    });
    expect(headless.spec.selector).toEqual(
      named(objects, 'Deployment', objectName(service)).spec.selector.matchLabels,
    );
    // The certificate names it, so a client dialling it verifies the server.
    const cert = named(objects, 'Certificate', objectName(service));
    expect(cert.spec.dnsNames).toContain(
      `${objectName(service)}-grpc.${release.namespace}.svc.cluster.local`,
    );
    // The NetworkPolicies select pods, not Services: every peer's egress still names the pods.
    for (const addr of PEER_ADDRS[service]) {
      const peer = serviceOfAddr(addr);
      const egress = named(objects, 'NetworkPolicy', objectName(service)).spec.egress;
      const rule = egress.find((r: Json) => r.ports?.[0]?.port === GRPC_PORTS[peer] && r.to[0].podSelector);
      expect({ addr, selector: rule?.to[0].podSelector.matchLabels }).toEqual({
        addr,
        selector: named(objects, 'Service', `${objectName(peer)}-grpc`).spec.selector,
      });
    }
  });
});

describe('grpc values', () => {
  it('headlessServices=false: no headless Service, the peers dial the ClusterIP Service', () => {
    const objects = renderChart([...REQUIRED_SETS, ...sets('grpc.headlessServices=false')]);
    expect(
      ofKind(objects, 'Service')
        .map((s) => s.metadata.name)
        .sort(),
    ).toEqual(SERVICES.map(objectName).sort());
    expect(serviceEnv(objects, 'signer').get('IDENTITY_ADDR')?.value).toBe(`${objectName('identity')}:50051`);
    expect(named(objects, 'Certificate', objectName('identity')).spec.dnsNames).toHaveLength(4);
  });

  it('maxConnectionAgeMs becomes GRPC_MAX_CONNECTION_AGE_MS on every service (blank: left out)', () => {
    let objects = renderChart(REQUIRED_SETS);
    for (const s of SERVICES) expect(serviceEnv(objects, s).has('GRPC_MAX_CONNECTION_AGE_MS')).toBe(false);
    objects = renderChart([...REQUIRED_SETS, ...sets('grpc.maxConnectionAgeMs=60000')]);
    for (const s of SERVICES)
      expect(serviceEnv(objects, s).get('GRPC_MAX_CONNECTION_AGE_MS')?.value).toBe('60000');
  });

  it('a long release name still gives headless names of at most 63 characters, all distinct', () => {
    const objects = renderChart([...REQUIRED_SETS, ...sets(`fullnameOverride=${'x'.repeat(44)}`)]);
    const names = ofKind(objects, 'Service').map((s) => s.metadata.name);
    expect(new Set(names).size).toBe(names.length);
    for (const n of names) expect({ n, len: n.length <= 63 }).toEqual({ n, len: true });
    const gateway = named(objects, 'Deployment', `${'x'.repeat(44)}-gateway`).spec.template.spec
      .containers[0];
    const addr = gateway.env.find((e: Json) => e.name === 'WEBHOOK_DISPATCHER_ADDR').value as string;
    const host = addr.replace('dns:///', '').split('.')[0];
    expect(names).toContain(host);
  });
});

describe('HorizontalPodAutoscaler (autoscaling)', () => {
  it('renders none by default and keeps the Deployments’ replicas', () => {
    const objects = renderChart(production);
    expect(ofKind(objects, 'HorizontalPodAutoscaler')).toEqual([]);
    expect(named(objects, 'Deployment', objectName('gateway')).spec.replicas).toBe(3);
  });

  it('renders a valid HPA per enabled service, merges a service’s settings over the defaults, and leaves replicas to it', () => {
    const objects = renderChart([
      ...production,
      ...sets(
        'services.gateway.autoscaling.enabled=true',
        'services.gateway.autoscaling.maxReplicas=12',
        'services.vault-crypto.autoscaling.enabled=true',
      ),
    ]);
    const hpas = ofKind(objects, 'HorizontalPodAutoscaler');
    expect(validationErrors(hpas)).toEqual([]);
    expect(hpas.map((h) => h.metadata.name).sort()).toEqual([
      objectName('gateway'),
      objectName('vault-crypto'),
    ]);
    expect(named(objects, 'HorizontalPodAutoscaler', objectName('gateway')).spec).toEqual({
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: objectName('gateway') },
      minReplicas: 2,
      maxReplicas: 12,
      metrics: [
        {
          type: 'Resource',
          resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 70 } },
        },
      ],
    });
    expect(named(objects, 'HorizontalPodAutoscaler', objectName('vault-crypto')).spec.maxReplicas).toBe(6);
    expect(named(objects, 'Deployment', objectName('gateway')).spec.replicas).toBeUndefined();
    expect(named(objects, 'Deployment', objectName('policy')).spec.replicas).toBe(3);
    // The PodDisruptionBudget still selects the same pods and stays valid.
    const pdb = named(objects, 'PodDisruptionBudget', objectName('gateway'));
    expect(validationErrors([pdb])).toEqual([]);
    expect(pdb.spec.selector.matchLabels).toEqual(
      named(objects, 'Deployment', objectName('gateway')).spec.selector.matchLabels,
    );
  });

  it('refuses minReplicas above maxReplicas', () => {
    const { status, stderr } = renderFailure([
      ...production,
      ...sets('serviceDefaults.autoscaling.enabled=true', 'serviceDefaults.autoscaling.minReplicas=8'),
    ]);
    expect(status).not.toBe(0);
    expect(stderr).toMatch(/minReplicas \(8\) is above maxReplicas \(6\)/);
  });
});
