// Each service's NetworkPolicy admits exactly the callers of the matrix in facts.ts to its gRPC
// port, the monitoring scraper to its metrics port, and (gateway only) the ingress controller to
// the HTTP port; nothing else. Checked on the rendered objects, pair by pair.
import {
  ALLOWED_CALLERS,
  GATEWAY_HTTP_PORT,
  GRPC_PORTS,
  METRICS_PORT,
  SERVICES,
  type ServiceName,
} from './facts';
import {
  type K8sObject,
  REQUIRED_SETS,
  named,
  objectName,
  ofKind,
  release,
  renderChart,
  runHelm,
  chartDir,
  scenarios,
  type Json,
} from './helm';

/** The rules of a policy that open `port`. */
function rulesForPort(policy: K8sObject, port: number): Json[] {
  return (policy.spec.ingress ?? []).filter((rule: Json) =>
    (rule.ports ?? []).some((p: Json) => p.port === port),
  );
}

/**
 * The services of this release whose pods a policy admits to `port`. A peer that is not a plain
 * same-namespace pod selector of this release's pods fails the test: it would admit more than
 * the named callers.
 */
function admittedServices(policy: K8sObject, port: number): ServiceName[] {
  const callers: ServiceName[] = [];
  for (const rule of rulesForPort(policy, port)) {
    expect(rule.from?.length ?? 0).toBeGreaterThan(0); // an empty `from` admits everyone
    for (const peer of rule.from) {
      expect(peer.namespaceSelector).toBeUndefined();
      expect(peer.ipBlock).toBeUndefined();
      const labels = peer.podSelector?.matchLabels ?? {};
      expect(labels).toMatchObject({
        'app.kubernetes.io/name': 'custos',
        'app.kubernetes.io/instance': release.name,
      });
      expect(peer.podSelector.matchExpressions).toBeUndefined();
      callers.push(labels['app.kubernetes.io/component']);
    }
  }
  return callers.sort();
}

describe.each(scenarios)('NetworkPolicies rendered with $label', ({ args }) => {
  let objects: K8sObject[];
  beforeAll(() => {
    objects = renderChart(args);
  });

  it.each(SERVICES)('%s: selects its own pods and restricts ingress and egress', (service) => {
    const policy = named(objects, 'NetworkPolicy', objectName(service));
    const deployment = named(objects, 'Deployment', objectName(service));
    expect(policy.spec.podSelector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
    expect(policy.spec.policyTypes).toEqual(['Ingress', 'Egress']);
  });

  it.each(SERVICES)('%s: admits exactly its allowed callers to the gRPC port', (service) => {
    const policy = named(objects, 'NetworkPolicy', objectName(service));
    expect(admittedServices(policy, GRPC_PORTS[service])).toEqual([...ALLOWED_CALLERS[service]].sort());
  });

  it('admits a caller if and only if the matrix lists it, for every pair of services', () => {
    const verdicts: string[] = [];
    const expected: string[] = [];
    for (const callee of SERVICES) {
      const admitted = admittedServices(
        named(objects, 'NetworkPolicy', objectName(callee)),
        GRPC_PORTS[callee],
      );
      for (const caller of SERVICES) {
        verdicts.push(`${caller} -> ${callee}: ${admitted.includes(caller) ? 'allowed' : 'denied'}`);
        expected.push(
          `${caller} -> ${callee}: ${ALLOWED_CALLERS[callee].includes(caller) ? 'allowed' : 'denied'}`,
        );
      }
    }
    expect(verdicts).toEqual(expected);
  });

  it('vault-crypto admits gateway, signer and identity but not policy, audit or billing', () => {
    const admitted = admittedServices(
      named(objects, 'NetworkPolicy', objectName('vault-crypto')),
      GRPC_PORTS['vault-crypto'],
    );
    // Policy calls no service since issue 12 (the gateway passes it the vault's facts); identity
    // asks for the secret of an e-mailed share link (one RPC, by the service's allow-list).
    expect(admitted).toEqual(['gateway', 'identity', 'signer']);
    expect(admitted).not.toContain('audit');
    expect(admitted).not.toContain('billing');
  });

  it.each(SERVICES)('%s: opens no port beyond gRPC, metrics and (gateway) HTTP', (service) => {
    const policy = named(objects, 'NetworkPolicy', objectName(service));
    const ports = policy.spec.ingress.flatMap((rule: Json) => rule.ports.map((p: Json) => p.port));
    const allowed = [
      GRPC_PORTS[service],
      METRICS_PORT,
      ...(service === 'gateway' ? [GATEWAY_HTTP_PORT] : []),
    ];
    for (const port of ports) expect(allowed).toContain(port);
    // Every rule names its ports: a rule without ports would open all of them.
    for (const rule of policy.spec.ingress) expect(rule.ports?.length ?? 0).toBeGreaterThan(0);
  });

  it.each(SERVICES)('%s: metrics only from the monitoring namespace', (service) => {
    const policy = named(objects, 'NetworkPolicy', objectName(service));
    const rules = rulesForPort(policy, METRICS_PORT);
    expect(rules).toHaveLength(1);
    expect(rules[0].from).toEqual([
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
        podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
      },
    ]);
  });

  it('gateway HTTP only from the ingress controller namespace', () => {
    const policy = named(objects, 'NetworkPolicy', objectName('gateway'));
    const rules = rulesForPort(policy, GATEWAY_HTTP_PORT);
    expect(rules).toHaveLength(1);
    expect(rules[0].from).toHaveLength(1);
    expect(rules[0].from[0].namespaceSelector).toEqual({
      matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' },
    });
    for (const service of SERVICES.filter((s) => s !== 'gateway')) {
      expect(rulesForPort(named(objects, 'NetworkPolicy', objectName(service)), GATEWAY_HTTP_PORT)).toEqual(
        [],
      );
    }
  });

  it('the migration Job admits no connection at all (it serves nothing)', () => {
    const policy = named(objects, 'NetworkPolicy', `${release.name}-migrate`);
    const podLabels = ofKind(objects, 'Job')[0]!.spec.template.metadata.labels;
    expect(podLabels).toMatchObject(policy.spec.podSelector.matchLabels);
    expect(policy.spec.podSelector.matchLabels['app.kubernetes.io/component']).toBe('migrate');
    expect(policy.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(policy.spec.ingress).toEqual([]);
  });
});

describe('networkPolicy values', () => {
  it('a different monitoring namespace and ingress controller are honoured', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      '--set',
      'networkPolicy.monitoring.namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=observability',
      '--set',
      'networkPolicy.ingressController.namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=traefik',
    ]);
    const gateway = named(objects, 'NetworkPolicy', objectName('gateway'));
    expect(rulesForPort(gateway, METRICS_PORT)[0].from[0].namespaceSelector.matchLabels).toEqual({
      'kubernetes.io/metadata.name': 'observability',
    });
    expect(rulesForPort(gateway, GATEWAY_HTTP_PORT)[0].from[0].namespaceSelector.matchLabels).toEqual({
      'kubernetes.io/metadata.name': 'traefik',
    });
  });

  it('networkPolicy.enabled=false renders none', () => {
    const { status, stdout } = runHelm([
      'template',
      'custos',
      chartDir,
      ...REQUIRED_SETS,
      '--set',
      'networkPolicy.enabled=false',
    ]);
    expect(status).toBe(0);
    expect(stdout).not.toMatch(/kind: NetworkPolicy/);
  });
});
