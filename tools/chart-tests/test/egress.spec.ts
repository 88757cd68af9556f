// Egress of every service's NetworkPolicy, checked by evaluating the rendered rules: each service
// reaches DNS, exactly the peers it calls (facts.ts) on their gRPC ports, and its dependencies;
// no service but the webhook-dispatcher (and vault-crypto towards a KMS) reaches the internet;
// the webhook-dispatcher reaches the internet but not the pod and Service networks, the private
// ranges or the cloud metadata addresses. Plus the migration Job's policy and the optional
// ingress policies on in-cluster Postgres, NATS and Redis.
import {
  DATABASE_SERVICES,
  GRPC_PORTS,
  METADATA_CIDRS,
  NATS_SERVICES,
  PEER_ADDRS,
  REDIS_SERVICES,
  SERVICES,
  type ServiceName,
  serviceOfAddr,
} from './facts';
import {
  type Json,
  type K8sObject,
  REQUIRED_SETS,
  named,
  objectName,
  ofKind,
  release,
  renderChart,
  renderFailure,
  scenarios,
  sets,
} from './helm';

// --- addresses ---------------------------------------------------------------------------------

/** An address as [family, value]; IPv4 and full or `::`-compressed IPv6. */
function parseIp(ip: string): [4 | 6, bigint] {
  if (!ip.includes(':')) {
    const parts = ip.split('.').map(Number);
    if (parts.length !== 4 || parts.some((p) => !(p >= 0 && p <= 255))) throw new Error(`bad IPv4 ${ip}`);
    return [4, parts.reduce((acc, p) => (acc << 8n) | BigInt(p), 0n)];
  }
  const [head, tail] = ip.split('::');
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  if (groups.length !== 8) throw new Error(`bad IPv6 ${ip}`);
  return [6, groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n)];
}

function inCidr(ip: string, cidr: string): boolean {
  const [net, bitsText] = cidr.split('/');
  const [family, base] = parseIp(net!);
  const [ipFamily, value] = parseIp(ip);
  if (family !== ipFamily) return false;
  const width = family === 4 ? 32 : 128;
  const shift = BigInt(width - Number(bitsText));
  return value >> shift === base >> shift;
}

/** Whether `inner` lies inside `outer` (same family, prefix at least as long, same network). */
function cidrWithin(inner: string, outer: string): boolean {
  return inCidr(inner.split('/')[0]!, outer) && Number(inner.split('/')[1]) >= Number(outer.split('/')[1]);
}

const RFC1918 = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'];

// --- evaluating rules --------------------------------------------------------------------------

function portMatches(rule: Json, port: number, protocol = 'TCP'): boolean {
  if (!rule.ports || rule.ports.length === 0) return true;
  return rule.ports.some(
    (p: Json) =>
      (p.protocol ?? 'TCP') === protocol &&
      (p.endPort ? port >= p.port && port <= p.endPort : p.port === port),
  );
}

/** Whether the policy's egress admits a connection to an address (ipBlock peers) on a port. */
function allowsAddress(policy: K8sObject, ip: string, port: number, protocol = 'TCP'): boolean {
  return (policy.spec.egress ?? []).some((rule: Json) => {
    if (!portMatches(rule, port, protocol)) return false;
    if (!rule.to || rule.to.length === 0) return true; // every destination
    return rule.to.some(
      (peer: Json) =>
        peer.ipBlock &&
        inCidr(ip, peer.ipBlock.cidr) &&
        !(peer.ipBlock.except ?? []).some((e: string) => inCidr(ip, e)),
    );
  });
}

/** The Custos services a policy's egress reaches by pod selector, each with the ports opened to it. */
function reachedServices(policy: K8sObject): Map<string, number[]> {
  const reached = new Map<string, number[]>();
  for (const rule of policy.spec.egress ?? []) {
    for (const peer of rule.to ?? []) {
      const labels = peer.podSelector?.matchLabels ?? {};
      if (labels['app.kubernetes.io/name'] !== 'custos') continue;
      expect(labels['app.kubernetes.io/instance']).toBe(release.name);
      expect(peer.namespaceSelector).toBeUndefined();
      const component = labels['app.kubernetes.io/component'];
      reached.set(component, [...(reached.get(component) ?? []), ...rule.ports.map((p: Json) => p.port)]);
    }
  }
  return reached;
}

/** Addresses no service may reach through an internet rule. */
const CLUSTER_AND_METADATA: Array<[string, string]> = [
  ['the pod network', '10.244.3.7'],
  ['the Service network', '10.96.0.10'],
  ['a private network', '192.168.1.20'],
  ['a private network', '172.20.4.4'],
  ['carrier-grade NAT space', '100.64.1.1'],
  ['link-local', '169.254.10.10'],
  ['the AWS/GCP/Azure metadata service', '169.254.169.254'],
  ['the Alibaba metadata service', '100.100.100.200'],
  ['the Azure wireserver (host endpoint, public address)', '168.63.129.16'],
  ['the AWS IPv6 metadata service', 'fd00:ec2::254'],
  ['IPv6 unique-local', 'fd12:3456::1'],
  ['IPv6 link-local', 'fe80::1'],
];
const PUBLIC = ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'];

function expectedPeers(service: ServiceName): ServiceName[] {
  return PEER_ADDRS[service].map(serviceOfAddr).sort();
}

describe.each(scenarios)('egress rendered with $label', ({ args }) => {
  let objects: K8sObject[];
  const policy = (s: string) => named(objects, 'NetworkPolicy', objectName(s));
  beforeAll(() => {
    objects = renderChart(args);
  });

  it.each(SERVICES)('%s: reaches exactly its peers, each on its gRPC port only', (service) => {
    const reached = reachedServices(policy(service));
    expect([...reached.keys()].sort()).toEqual(expectedPeers(service));
    for (const [peer, ports] of reached)
      expect({ peer, ports }).toEqual({ peer, ports: [GRPC_PORTS[peer as ServiceName]] });
  });

  it('reaches a peer if and only if it calls it, for every pair of services', () => {
    const verdicts: string[] = [];
    const expected: string[] = [];
    for (const caller of SERVICES) {
      const reached = reachedServices(policy(caller));
      for (const callee of SERVICES) {
        verdicts.push(`${caller} -> ${callee}: ${reached.has(callee) ? 'allowed' : 'denied'}`);
        expected.push(
          `${caller} -> ${callee}: ${expectedPeers(caller).includes(callee) ? 'allowed' : 'denied'}`,
        );
      }
    }
    expect(verdicts).toEqual(expected);
    // Every service reaches identity for its keys (JWKS); the gateway everything it serves.
    for (const s of SERVICES.filter((x) => x !== 'identity'))
      expect(reachedServices(policy(s)).has('identity')).toBe(true);
    expect([...reachedServices(policy('gateway')).keys()].sort()).toEqual(
      SERVICES.filter((s) => s !== 'gateway').sort(),
    );
  });

  it.each(SERVICES)('%s: resolves names through the cluster DNS only', (service) => {
    const dns = policy(service).spec.egress.filter((r: Json) => r.ports?.some((p: Json) => p.port === 53));
    expect(dns).toHaveLength(1);
    expect(dns[0].to).toEqual([
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
        podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
      },
    ]);
    expect(dns[0].ports).toEqual([
      { port: 53, protocol: 'UDP' },
      { port: 53, protocol: 'TCP' },
    ]);
  });

  it.each(SERVICES)('%s: every egress rule names its destinations (none admits every address)', (service) => {
    for (const rule of policy(service).spec.egress) {
      expect(rule.to?.length ?? 0).toBeGreaterThan(0);
      // A peer with only an empty selector would select every pod (or namespace).
      for (const peer of rule.to) expect(peer).not.toEqual({ podSelector: {} });
      // The API server accepts only CIDRs with a prefix in an ipBlock.
      for (const peer of rule.to)
        for (const cidr of peer.ipBlock ? [peer.ipBlock.cidr, ...(peer.ipBlock.except ?? [])] : [])
          expect(cidr).toMatch(/^[0-9a-f:.]+\/\d{1,3}$/);
    }
  });

  // webhook-dispatcher delivers to the internet, vault-crypto reaches its KMS, signer its chain
  // nodes, identity its SMTP server (each tested below).
  it.each(SERVICES.filter((s) => !['webhook-dispatcher', 'vault-crypto', 'signer', 'identity'].includes(s)))(
    '%s: cannot reach the internet on any port',
    (service) => {
      for (const rule of policy(service).spec.egress)
        for (const peer of rule.to)
          if (peer.ipBlock)
            expect({
              service,
              cidr: peer.ipBlock.cidr,
              private: RFC1918.some((r) => cidrWithin(peer.ipBlock.cidr, r)),
            }).toEqual({
              service,
              cidr: peer.ipBlock.cidr,
              private: true,
            });
      for (const ip of PUBLIC)
        for (const port of [443, 80, 5432, 4222, 6379, 22])
          expect({ service, ip, port, allowed: allowsAddress(policy(service), ip, port) }).toEqual({
            service,
            ip,
            port,
            allowed: false,
          });
    },
  );

  it('Postgres and NATS for the services with a database, Redis for its users, nothing else', () => {
    const ports = (s: string) =>
      new Set<number>(policy(s).spec.egress.flatMap((r: Json) => (r.ports ?? []).map((p: Json) => p.port)));
    // values-production.yaml puts Redis (TLS) on 6380.
    const redisPort = args.some((a) => a.endsWith('values-production.yaml')) ? 6380 : 6379;
    for (const s of SERVICES) {
      const p = ports(s);
      expect({ s, postgres: p.has(5432) }).toEqual({
        s,
        postgres: (DATABASE_SERVICES as string[]).includes(s),
      });
      expect({ s, nats: p.has(4222) }).toEqual({ s, nats: (NATS_SERVICES as string[]).includes(s) });
      expect({ s, redis: p.has(redisPort) }).toEqual({ s, redis: REDIS_SERVICES.includes(s) });
    }
  });

  it('webhook-dispatcher reaches the internet but not the cluster, private or metadata networks', () => {
    const hooks = policy('webhook-dispatcher');
    for (const ip of PUBLIC)
      expect({ ip, allowed: allowsAddress(hooks, ip, 443) }).toEqual({ ip, allowed: true });
    for (const [what, ip] of CLUSTER_AND_METADATA)
      for (const port of [443, 80, 8080, GRPC_PORTS['vault-crypto'], GRPC_PORTS.identity])
        expect({ what, ip, port, allowed: allowsAddress(hooks, ip, port) }).toEqual({
          what,
          ip,
          port,
          allowed: false,
        });
    // The metadata addresses are excluded by name too, whatever privateCidrs says.
    const internet = hooks.spec.egress
      .flatMap((r: Json) => r.to)
      .filter((p: Json) => ['0.0.0.0/0', '::/0'].includes(p.ipBlock?.cidr));
    expect(internet.map((p: Json) => p.ipBlock.cidr).sort()).toEqual(['0.0.0.0/0', '::/0']);
    const except = internet.flatMap((p: Json) => p.ipBlock.except);
    for (const m of METADATA_CIDRS) expect(except).toContain(m);
    // Every except lies inside its block (the API server refuses others).
    for (const p of internet)
      for (const e of p.ipBlock.except)
        expect({ e, inside: cidrWithin(e, p.ipBlock.cidr) }).toEqual({ e, inside: true });
  });

  it('webhook-dispatcher cannot reach another service’s gRPC port, except identity’s keys', () => {
    expect([...reachedServices(policy('webhook-dispatcher')).keys()]).toEqual(['identity']);
  });
});

describe('egress values', () => {
  const render = (...values: string[]) => renderChart([...REQUIRED_SETS, ...sets(...values)]);
  const policyOf = (objects: K8sObject[], s: string) => named(objects, 'NetworkPolicy', objectName(s));

  it('the pod and Service networks are excepted from the internet even with no private ranges', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      '--set-json',
      'networkPolicy.internet.privateCidrs=[]',
      ...sets(
        'networkPolicy.internet.podCidrs={10.52.0.0/14}',
        'networkPolicy.internet.serviceCidrs={10.0.0.0/16,fd00:10:96::/112}',
      ),
    ]);
    const hooks = policyOf(objects, 'webhook-dispatcher');
    expect(allowsAddress(hooks, '10.53.1.1', 443)).toBe(false);
    expect(allowsAddress(hooks, '10.0.0.10', 443)).toBe(false);
    expect(allowsAddress(hooks, 'fd00:10:96::a', 443)).toBe(false);
    expect(allowsAddress(hooks, '169.254.169.254', 80)).toBe(false);
    expect(allowsAddress(hooks, 'fd00:ec2::254', 80)).toBe(false);
    // Without the private ranges, another private network is the operator's choice.
    expect(allowsAddress(hooks, '192.168.1.1', 443)).toBe(true);
  });

  it('webhooks.allowedCidrs are opened to the webhook-dispatcher; webhookPorts narrows it', () => {
    const objects = render('webhooks.allowedCidrs={10.20.0.0/16}', 'networkPolicy.webhookPorts[0].port=443');
    const hooks = policyOf(objects, 'webhook-dispatcher');
    expect(allowsAddress(hooks, '10.20.5.5', 443)).toBe(true);
    expect(allowsAddress(hooks, '10.20.5.5', 80)).toBe(false);
    expect(allowsAddress(hooks, '93.184.216.34', 443)).toBe(true);
    expect(allowsAddress(hooks, '93.184.216.34', 80)).toBe(false);
    for (const s of SERVICES.filter((x) => x !== 'webhook-dispatcher'))
      expect({ s, allowed: allowsAddress(policyOf(objects, s), '10.20.5.5', 443) }).toEqual({
        s,
        allowed: false,
      });
  });

  it('a bare webhooks.allowedCidrs address is opened as a single host (/32, /128), also in the env', () => {
    const objects = render('webhooks.allowedCidrs={10.1.2.3,fd00::5,10.20.0.0/16}');
    const hooks = policyOf(objects, 'webhook-dispatcher');
    const cidrs = hooks.spec.egress
      .flatMap((r: Json) => r.to.map((p: Json) => p.ipBlock?.cidr))
      .filter(Boolean);
    expect(cidrs).toEqual(expect.arrayContaining(['10.1.2.3/32', 'fd00::5/128', '10.20.0.0/16']));
    for (const c of cidrs) expect(c).toMatch(/\/\d{1,3}$/);
    expect(allowsAddress(hooks, '10.1.2.3', 443)).toBe(true);
    expect(allowsAddress(hooks, '10.1.2.4', 443)).toBe(false);
    expect(allowsAddress(hooks, 'fd00::5', 443)).toBe(true);
    expect(allowsAddress(hooks, 'fd00::6', 443)).toBe(false);
    const [container] = named(objects, 'Deployment', objectName('webhook-dispatcher')).spec.template.spec
      .containers;
    expect(container.env).toContainEqual({
      name: 'WEBHOOK_ALLOWED_CIDRS',
      value: '10.1.2.3/32,fd00::5/128,10.20.0.0/16',
    });
  });

  it('networkPolicy.internet.nodeCidrs (nodes with public addresses) are excepted from every internet rule', () => {
    const defaults = renderChart(REQUIRED_SETS);
    // Empty by default: a public node address is reachable until the operator names it.
    expect(allowsAddress(policyOf(defaults, 'webhook-dispatcher'), '203.0.113.7', 10250)).toBe(true);
    const objects = render(
      'networkPolicy.internet.nodeCidrs={203.0.113.0/24,2001:db8:1::/64}',
      'kms.provider=aws-kms',
      'kms.aws.keyId=alias/custos',
    );
    const hooks = policyOf(objects, 'webhook-dispatcher');
    const kms = policyOf(objects, 'vault-crypto');
    for (const port of [443, 10250, 30080]) {
      expect({ port, allowed: allowsAddress(hooks, '203.0.113.7', port) }).toEqual({ port, allowed: false });
      expect({ port, allowed: allowsAddress(hooks, '2001:db8:1::7', port) }).toEqual({
        port,
        allowed: false,
      });
    }
    expect(allowsAddress(kms, '203.0.113.7', 443)).toBe(false);
    expect(allowsAddress(hooks, '93.184.216.34', 443)).toBe(true);
    expect(allowsAddress(kms, '52.94.1.1', 443)).toBe(true);
  });

  it('vault-crypto reaches its KMS: the internet on 443 by default, or the named network', () => {
    const local = render();
    expect(allowsAddress(policyOf(local, 'vault-crypto'), '52.94.1.1', 443)).toBe(false);
    const aws = render('kms.provider=aws-kms', 'kms.aws.keyId=alias/custos');
    const vc = policyOf(aws, 'vault-crypto');
    expect(allowsAddress(vc, '52.94.1.1', 443)).toBe(true);
    expect(allowsAddress(vc, '52.94.1.1', 80)).toBe(false);
    expect(allowsAddress(vc, '169.254.169.254', 443)).toBe(false);
    expect(allowsAddress(vc, '10.244.0.9', 443)).toBe(false);
    const hsm = render(
      'kms.provider=pkcs11',
      'kms.pkcs11.library=/opt/hsm/lib.so',
      'kms.pkcs11.keyLabel=k',
      'kms.pkcs11.pinSecret=pin',
      'networkPolicy.kms.to[0].ipBlock.cidr=10.30.0.0/28',
      'networkPolicy.kms.ports[0].port=1792',
    );
    const vh = policyOf(hsm, 'vault-crypto');
    expect(allowsAddress(vh, '10.30.0.5', 1792)).toBe(true);
    expect(allowsAddress(vh, '52.94.1.1', 443)).toBe(false);
    for (const s of SERVICES.filter((x) => x !== 'vault-crypto'))
      expect({ s, allowed: allowsAddress(policyOf(hsm, s), '10.30.0.5', 1792) }).toEqual({
        s,
        allowed: false,
      });
  });

  it('signer alone reaches chain nodes: the internet on 443 by default, or the named network', () => {
    const objects = render();
    const signer = policyOf(objects, 'signer');
    expect(allowsAddress(signer, '104.18.2.3', 443)).toBe(true);
    expect(allowsAddress(signer, '104.18.2.3', 8545)).toBe(false);
    expect(allowsAddress(signer, '169.254.169.254', 443)).toBe(false);
    expect(allowsAddress(signer, '10.244.0.9', 443)).toBe(false);
    for (const s of SERVICES.filter((x) => x !== 'signer' && x !== 'webhook-dispatcher'))
      expect({ s, allowed: allowsAddress(policyOf(objects, s), '104.18.2.3', 443) }).toEqual({
        s,
        allowed: false,
      });
    const own = render(
      'networkPolicy.chainRpc.to[0].ipBlock.cidr=10.40.0.0/24',
      'networkPolicy.chainRpc.ports[0].port=8545',
    );
    const s2 = policyOf(own, 'signer');
    expect(allowsAddress(s2, '10.40.0.7', 8545)).toBe(true);
    expect(allowsAddress(s2, '104.18.2.3', 443)).toBe(false);
  });

  it('identity alone reaches its SMTP server: the internet on 587 and 465 by default, or the named network', () => {
    const objects = render();
    const identity = policyOf(objects, 'identity');
    for (const port of [587, 465]) expect(allowsAddress(identity, '198.51.100.25', port)).toBe(true);
    for (const port of [25, 443, 80, 22, 5432])
      expect(allowsAddress(identity, '198.51.100.25', port)).toBe(false);
    expect(allowsAddress(identity, '169.254.169.254', 587)).toBe(false);
    expect(allowsAddress(identity, '10.244.0.9', 587)).toBe(false);
    for (const s of SERVICES.filter((x) => x !== 'identity' && x !== 'webhook-dispatcher'))
      expect({ s, allowed: allowsAddress(policyOf(objects, s), '198.51.100.25', 587) }).toEqual({
        s,
        allowed: false,
      });
    const own = render(
      'networkPolicy.smtp.to[0].ipBlock.cidr=10.30.0.0/24',
      'networkPolicy.smtp.ports[0].port=1025',
    );
    const id2 = policyOf(own, 'identity');
    expect(allowsAddress(id2, '10.30.0.5', 1025)).toBe(true);
    expect(allowsAddress(id2, '198.51.100.25', 587)).toBe(false);
  });

  it('the OTLP collector is reached only when otel.endpoint is set', () => {
    const without = render();
    const withOtel = render('otel.endpoint=http://otel:4318');
    for (const s of SERVICES) {
      expect(allowsAddress(policyOf(without, s), '10.1.2.3', 4318)).toBe(false);
      expect(allowsAddress(policyOf(withOtel, s), '10.1.2.3', 4318)).toBe(true);
    }
  });

  it('a dependency with nowhere to go is refused rather than opened to every address', () => {
    const r = renderFailure([...REQUIRED_SETS, '--set-json', 'networkPolicy.postgres.to=[]']);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('networkPolicy.postgres: set `to`');
  });

  it('extraEgress is added to every service', () => {
    const objects = render(
      'networkPolicy.extraEgress[0].to[0].ipBlock.cidr=10.9.9.9/32',
      'networkPolicy.extraEgress[0].ports[0].port=3128',
    );
    for (const s of SERVICES) expect(allowsAddress(policyOf(objects, s), '10.9.9.9', 3128)).toBe(true);
  });
});

describe('the migration Job’s policy', () => {
  it('is a hook before the Job that lets it reach DNS and Postgres only', () => {
    const objects = renderChart(REQUIRED_SETS);
    const policy = named(objects, 'NetworkPolicy', `${release.name}-migrate`);
    expect(policy.metadata.annotations).toMatchObject({
      'helm.sh/hook': 'pre-install,pre-upgrade',
      'helm.sh/hook-delete-policy': 'before-hook-creation',
    });
    const job = ofKind(objects, 'Job')[0]!;
    expect(Number(policy.metadata.annotations['helm.sh/hook-weight'])).toBeLessThan(
      Number(job.metadata.annotations['helm.sh/hook-weight']),
    );
    const ports = policy.spec.egress.flatMap((r: Json) => r.ports.map((p: Json) => p.port)).sort();
    expect(ports).toEqual([53, 53, 5432]);
    expect(reachedServices(policy).size).toBe(0);
    for (const ip of PUBLIC) expect(allowsAddress(policy, ip, 443)).toBe(false);
  });

  it('is not rendered without migrations', () => {
    const objects = renderChart([...REQUIRED_SETS, ...sets('migrations.enabled=false')]);
    expect(ofKind(objects, 'NetworkPolicy').map((p) => p.metadata.name)).not.toContain(
      `${release.name}-migrate`,
    );
  });
});

describe('in-cluster Postgres, NATS and Redis', () => {
  it('get an ingress policy naming exactly their Custos clients, and the clients reach them by label', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      ...sets(
        'networkPolicy.postgres.inCluster.enabled=true',
        'networkPolicy.postgres.inCluster.podSelector.matchLabels.app=postgres',
        'networkPolicy.redis.inCluster.enabled=true',
        'networkPolicy.redis.inCluster.namespace=cache',
        'networkPolicy.redis.inCluster.podSelector.matchLabels.app=redis',
      ),
      '--set-json',
      'networkPolicy.redis.to=[]',
    ]);
    const postgres = named(objects, 'NetworkPolicy', `${release.name}-postgres-clients`);
    expect(postgres.metadata.namespace).toBe(release.namespace);
    expect(postgres.spec.podSelector).toEqual({ matchLabels: { app: 'postgres' } });
    expect(postgres.spec.policyTypes).toEqual(['Ingress']);
    const [rule] = postgres.spec.ingress;
    expect(rule.ports).toEqual([{ port: 5432, protocol: 'TCP' }]);
    expect(rule.from).toHaveLength(1);
    expect(rule.from[0].namespaceSelector).toBeUndefined();
    expect(rule.from[0].podSelector.matchLabels).toEqual({
      'app.kubernetes.io/name': 'custos',
      'app.kubernetes.io/instance': release.name,
    });
    expect(rule.from[0].podSelector.matchExpressions).toEqual([
      {
        key: 'app.kubernetes.io/component',
        operator: 'In',
        values: [...[...DATABASE_SERVICES].sort(), 'migrate'],
      },
    ]);

    const redis = named(objects, 'NetworkPolicy', `${release.name}-redis-clients`);
    expect(redis.metadata.namespace).toBe('cache');
    expect(redis.spec.ingress[0].from[0].namespaceSelector).toEqual({
      matchLabels: { 'kubernetes.io/metadata.name': release.namespace },
    });
    expect(redis.spec.ingress[0].from[0].podSelector.matchExpressions[0].values).toEqual(
      [...REDIS_SERVICES].sort(),
    );
    // The clients' egress: by label, in the dependency's namespace.
    const gateway = named(objects, 'NetworkPolicy', objectName('gateway'));
    const redisRule = gateway.spec.egress.find((r: Json) => r.ports?.some((p: Json) => p.port === 6379));
    expect(redisRule.to).toEqual([
      {
        podSelector: { matchLabels: { app: 'redis' } },
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'cache' } },
      },
    ]);
    expect(ofKind(objects, 'NetworkPolicy').map((p) => p.metadata.name)).not.toContain(
      `${release.name}-nats-clients`,
    );
  });

  it('values-production.yaml: NATS in namespace nats admits the eight NATS users and its own routes', () => {
    const objects = renderChart(scenarios[1]!.args);
    const nats = named(objects, 'NetworkPolicy', `${release.name}-nats-clients`);
    expect(nats.metadata.namespace).toBe('nats');
    expect(nats.spec.ingress[0].from[0].podSelector.matchExpressions[0].values).toEqual(
      [...NATS_SERVICES].sort(),
    );
    expect(nats.spec.ingress[1].ports).toEqual([{ port: 6222, protocol: 'TCP' }]);
  });

  it('an in-cluster dependency without a pod selector is refused', () => {
    const r = renderFailure([...REQUIRED_SETS, ...sets('networkPolicy.nats.inCluster.enabled=true')]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('networkPolicy.nats.inCluster.podSelector');
  });
});
