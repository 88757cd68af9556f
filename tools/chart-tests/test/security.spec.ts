// The hardening every pod must have (CONVENTIONS.md, "Kubernetes"), checked on the rendered
// Deployments and the migration Job, plus ports, probes, resources and the environment.
import {
  DATABASE_SERVICES,
  GATEWAY_HTTP_PORT,
  GRPC_PORTS,
  METRICS_PORT,
  PEER_ADDRS,
  SERVICES,
  serviceOfAddr,
} from './facts';
import {
  type K8sObject,
  TEST_SIGNING_KEK,
  named,
  objectName,
  ofKind,
  release,
  renderChart,
  scenarios,
  type Json,
} from './helm';

/** The mounts every service container has: /tmp and its mesh certificate (a whole Secret volume). */
const SERVICE_MOUNTS = [
  { name: 'tmp', mountPath: '/tmp' },
  { name: 'mesh-tls', mountPath: '/etc/custos/tls', readOnly: true },
];

/** The Postgres CA mount of values-production.yaml (postgres.tls.caSecret). */
const POSTGRES_CA_MOUNT = { name: 'postgres-ca', mountPath: '/etc/custos/postgres-ca', readOnly: true };

function expectHardenedPod(
  podSpec: Json,
  where: string,
  mounts: Json[] | ((container: Json) => Json[]) = [{ name: 'tmp', mountPath: '/tmp' }],
): void {
  expect({ where, automount: podSpec.automountServiceAccountToken }).toEqual({ where, automount: false });
  expect({ where, pod: podSpec.securityContext }).toMatchObject({
    where,
    pod: { runAsNonRoot: true, runAsUser: 10001, seccompProfile: { type: 'RuntimeDefault' } },
  });
  const tmp = (podSpec.volumes ?? []).find((v: Json) => v.name === 'tmp');
  expect({ where, tmp }).toMatchObject({ where, tmp: { emptyDir: {} } });
  for (const c of [...(podSpec.initContainers ?? []), ...podSpec.containers]) {
    const id = `${where} container ${c.name}`;
    expect({ id, sc: c.securityContext }).toMatchObject({
      id,
      sc: {
        runAsNonRoot: true,
        runAsUser: 10001,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      },
    });
    const expected = typeof mounts === 'function' ? mounts(c) : mounts;
    expect({ id, mounts: c.volumeMounts }).toEqual({ id, mounts: expected });
    expect({ id, resources: c.resources }).toMatchObject({
      id,
      resources: {
        requests: { cpu: expect.anything(), memory: expect.anything() },
        limits: { cpu: expect.anything(), memory: expect.anything() },
      },
    });
  }
}

function envOf(container: Json): Map<string, Json> {
  return new Map((container.env ?? []).map((e: Json) => [e.name, e]));
}

describe.each(scenarios)('pods rendered with $label', ({ label, args }) => {
  // values-production.yaml mounts the Postgres server's CA where a database is used.
  const postgresCa = label === 'values-production.yaml';
  let objects: K8sObject[];
  beforeAll(() => {
    objects = renderChart(args);
  });

  it.each(SERVICES)('%s: hardened pod with its own ServiceAccount', (service) => {
    const deployment = named(objects, 'Deployment', objectName(service));
    const pod = deployment.spec.template.spec;
    const withCa = postgresCa && (DATABASE_SERVICES as string[]).includes(service);
    expectHardenedPod(pod, service, withCa ? [...SERVICE_MOUNTS, POSTGRES_CA_MOUNT] : SERVICE_MOUNTS);
    expect(pod.containers).toHaveLength(1);
    expect(pod.serviceAccountName).toBe(objectName(service));
    expect(named(objects, 'ServiceAccount', objectName(service)).automountServiceAccountToken).toBe(false);
  });

  it.each(SERVICES)('%s: HTTP probes on the metrics port (the gRPC port speaks mTLS only)', (service) => {
    const [container] = named(objects, 'Deployment', objectName(service)).spec.template.spec.containers;
    const expected = {
      startupProbe: { path: '/livez', port: METRICS_PORT },
      livenessProbe: { path: '/livez', port: METRICS_PORT },
      readinessProbe: { path: '/readyz', port: METRICS_PORT },
    };
    for (const [probe, httpGet] of Object.entries(expected)) {
      expect({ probe, httpGet: container[probe]?.httpGet }).toEqual({ probe, httpGet });
      // A kubelet `grpc:` or `tcpSocket:` probe cannot present a client certificate.
      expect({ probe, grpc: container[probe]?.grpc, tcp: container[probe]?.tcpSocket }).toEqual({ probe });
    }
    // The probed port is the container's metrics port, and METRICS_PORT tells the service so.
    expect(container.ports.find((p: Json) => p.name === 'metrics').containerPort).toBe(METRICS_PORT);
    expect(envOf(container).get('GRPC_PORT')?.value).toBe(String(GRPC_PORTS[service]));
    expect(envOf(container).get('METRICS_PORT')?.value).toBe(String(METRICS_PORT));
  });

  it.each(SERVICES)('%s: container ports and Service ports', (service) => {
    const [container] = named(objects, 'Deployment', objectName(service)).spec.template.spec.containers;
    const expected: Array<[string, number]> = [
      ['grpc', GRPC_PORTS[service]],
      ['metrics', METRICS_PORT],
    ];
    if (service === 'gateway') expected.push(['http', GATEWAY_HTTP_PORT]);
    expect(container.ports.map((p: Json) => [p.name, p.containerPort])).toEqual(expected);
    const svc = named(objects, 'Service', objectName(service));
    expect(svc.spec.ports.map((p: Json) => [p.name, p.port, p.targetPort])).toEqual(
      expected.map(([name, port]) => [name, port, name]),
    );
    expect(svc.spec.selector).toEqual(
      named(objects, 'Deployment', objectName(service)).spec.selector.matchLabels,
    );
  });

  it.each(SERVICES)('%s: image custos-%s, peers as _ADDR variables, secrets only by reference', (service) => {
    const [container] = named(objects, 'Deployment', objectName(service)).spec.template.spec.containers;
    expect(container.image).toMatch(new RegExp(`^registry\\.test/custos/custos-${service}:[\\w.-]+$`));
    const env = envOf(container);
    const addrs = [...env.keys()].filter((k) => k.endsWith('_ADDR')).sort();
    expect(addrs).toEqual([...PEER_ADDRS[service]].sort());
    for (const addr of addrs) {
      const peer = serviceOfAddr(addr);
      // The peer's headless Service (every ready pod), dialled with dns:/// for round robin.
      expect(env.get(addr).value).toBe(
        `dns:///${objectName(peer)}-grpc.${release.namespace}.svc.cluster.local:${GRPC_PORTS[peer]}`,
      );
      // The address names a headless Service that exists and exposes that port.
      const peerSvc = named(objects, 'Service', `${objectName(peer)}-grpc`);
      expect(peerSvc.spec.clusterIP).toBe('None');
      expect(peerSvc.spec.ports.find((p: Json) => p.name === 'grpc').port).toBe(GRPC_PORTS[peer]);
    }
    const secretVars = [...env.values()].filter((e) => e.valueFrom?.secretKeyRef).map((e) => e.name);
    if (service === 'gateway') {
      expect(secretVars).toEqual(expect.arrayContaining(['REDIS_URL']));
      expect(env.has('DATABASE_URL')).toBe(false);
      expect(env.get('PORT')?.value).toBe(String(GATEWAY_HTTP_PORT));
    } else {
      expect(secretVars).toEqual(expect.arrayContaining(['DATABASE_URL']));
      // Services never migrate (the Job does, as the owner).
      expect(env.has('MIGRATE_ON_START')).toBe(false);
      expect(env.get('NATS_URL')?.value).toMatch(/^(nats|tls):\/\//);
    }
    // No connection string or key appears as a plain value.
    const plainUrls = [...env.values()].filter((e) =>
      /^(postgres(ql)?|rediss?|smtps?):\/\//.test(e.value ?? ''),
    );
    expect(plainUrls).toEqual([]);
    expect([...env.values()].filter((e) => e.value === TEST_SIGNING_KEK)).toEqual([]);
  });

  it('migration Job pod is hardened the same way', () => {
    const [job] = ofKind(objects, 'Job');
    const tmp = { name: 'tmp', mountPath: '/tmp' };
    expectHardenedPod(job!.spec.template.spec, 'migration Job', (c: Json) =>
      postgresCa && c.name.startsWith('migrate-') ? [tmp, POSTGRES_CA_MOUNT] : [tmp],
    );
  });

  it('services that own a schema are exactly the ones with DATABASE_URL', () => {
    const withDb = SERVICES.filter((s) =>
      envOf(named(objects, 'Deployment', objectName(s)).spec.template.spec.containers[0]).has('DATABASE_URL'),
    );
    expect(withDb).toEqual(DATABASE_SERVICES);
  });
});
