// How the services reach Postgres, NATS and Redis as operators run them: the JetStream stream's
// replicas and size (nats.streamReplicas, streamMaxBytes), the Postgres server's CA mounted for
// sslmode=verify-full (postgres.tls), and Redis Sentinel (redis.sentinel) with its NetworkPolicy.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { DATABASE_SERVICES, NATS_SERVICES, REDIS_SERVICES, SERVICES } from './facts';
import {
  type Json,
  type K8sObject,
  REQUIRED_SETS,
  named,
  objectName,
  ofKind,
  renderChart,
  renderFailure,
  renderedSecretValue,
  repoRoot,
  scenarios,
  serviceEnv,
  sets,
} from './helm';
import { validationErrors } from './validate';

const production = scenarios[1]!.args;
const CA_DIR = '/etc/custos/postgres-ca';
const VERIFY_FULL = `sslmode=verify-full&sslrootcert=${CA_DIR}/ca.crt`;

function podOf(objects: K8sObject[], service: string): Json {
  return named(objects, 'Deployment', objectName(service)).spec.template.spec;
}

describe('JetStream stream settings', () => {
  it('default: one replica, no size limit (NATS_STREAM_MAX_BYTES left to the service), on every NATS service only', () => {
    const objects = renderChart(REQUIRED_SETS);
    for (const service of SERVICES) {
      const env = serviceEnv(objects, service);
      const uses = (NATS_SERVICES as string[]).includes(service);
      expect({ service, replicas: env.get('NATS_STREAM_REPLICAS')?.value }).toEqual({
        service,
        replicas: uses ? '1' : undefined,
      });
      expect({ service, maxBytes: env.has('NATS_STREAM_MAX_BYTES') }).toEqual({ service, maxBytes: false });
      if (uses) expect(env.get('NATS_STREAM_MAX_AGE_HOURS')?.value).toBe('168');
    }
  });

  it('values-production.yaml: three replicas and a 10 GiB limit on every NATS service', () => {
    const objects = renderChart(production);
    for (const service of NATS_SERVICES) {
      const env = serviceEnv(objects, service);
      expect({
        service,
        r: env.get('NATS_STREAM_REPLICAS')?.value,
        b: env.get('NATS_STREAM_MAX_BYTES')?.value,
      }).toEqual({
        service,
        r: '3',
        b: '10737418240',
      });
    }
  });

  it('refuses replicas outside 1..5 and a size limit below 1 MiB', () => {
    for (const set of ['nats.streamReplicas=0', 'nats.streamReplicas=7', 'nats.streamMaxBytes=1000']) {
      const { status, stderr } = renderFailure([...REQUIRED_SETS, '--set', set]);
      expect({ set, status }).toEqual({ set, status: 1 });
      expect(stderr).toMatch(/streamReplicas|streamMaxBytes/);
    }
  });
});

describe('Postgres CA (postgres.tls.caSecret)', () => {
  it('is mounted nowhere by default', () => {
    const objects = renderChart(REQUIRED_SETS);
    for (const d of ofKind(objects, 'Deployment'))
      expect(d.spec.template.spec.volumes.map((v: Json) => v.name)).not.toContain('postgres-ca');
  });

  it('values-production.yaml mounts it read-only in every service with a database and every migration container', () => {
    const objects = renderChart(production);
    expect(validationErrors(objects)).toEqual([]);
    const volume = {
      name: 'postgres-ca',
      secret: { secretName: 'custos-postgres-ca', items: [{ key: 'ca.crt', path: 'ca.crt' }] },
    };
    const mount = { name: 'postgres-ca', mountPath: CA_DIR, readOnly: true };
    for (const service of SERVICES) {
      const pod = podOf(objects, service);
      const has = (DATABASE_SERVICES as string[]).includes(service);
      expect({ service, volume: pod.volumes.find((v: Json) => v.name === 'postgres-ca') }).toEqual({
        service,
        volume: has ? volume : undefined,
      });
      expect({
        service,
        mount: pod.containers[0].volumeMounts.find((m: Json) => m.name === 'postgres-ca'),
      }).toEqual({
        service,
        mount: has ? mount : undefined,
      });
    }
    const job = named(objects, 'Job', 'custos-migrate').spec.template.spec;
    expect(job.volumes).toContainEqual(volume);
    expect(job.initContainers).toHaveLength(DATABASE_SERVICES.length);
    for (const c of job.initContainers)
      expect({ c: c.name, mounts: c.volumeMounts }).toEqual({
        c: c.name,
        mounts: expect.arrayContaining([mount]),
      });
  });

  it('a derived service URL keeps the owner URL’s sslmode and sslrootcert (demo installs)', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      ...sets(
        `postgres.migrationUrl=postgres://owner:pw@db:5432/custos?${VERIFY_FULL}`,
        'postgres.tls.caSecret=pg-ca',
      ),
    ]);
    for (const service of DATABASE_SERVICES) {
      const ref = serviceEnv(objects, service).get('DATABASE_URL').valueFrom.secretKeyRef;
      expect(renderedSecretValue(objects, ref)).toMatch(
        new RegExp(`@db:5432/custos\\?${VERIFY_FULL.replace(/[?&./]/g, '\\$&')}$`),
      );
    }
  });

  it('docs/deployment.md and values-production.yaml show the URL parameters for the mounted file', () => {
    const docs = readFileSync(path.join(repoRoot, 'docs', 'deployment.md'), 'utf8');
    expect(docs).toContain(`?${VERIFY_FULL}`);
    expect(docs).toContain('postgres.tls.caSecret');
    const production = readFileSync(
      path.join(repoRoot, 'charts', 'custos', 'values-production.yaml'),
      'utf8',
    );
    expect(production).toContain(`?${VERIFY_FULL}`);
  });
});

describe('Redis Sentinel (redis.sentinel)', () => {
  const sentinelSets = sets(
    'redis.sentinel.enabled=true',
    'redis.sentinel.masterName=custos-master',
    'redis.sentinel.hosts={sentinel-0.redis:26379,sentinel-1.redis:26379,10.20.1.9:26380}',
    'redis.sentinel.username=sentinel-user',
  );

  it('is off by default: no REDIS_SENTINEL* variable, no egress to a sentinel port', () => {
    const objects = renderChart(REQUIRED_SETS);
    for (const service of SERVICES) {
      const names = [...serviceEnv(objects, service).keys()].filter((k) => k.startsWith('REDIS_SENTINEL'));
      expect({ service, names }).toEqual({ service, names: [] });
      const policy = JSON.stringify(named(objects, 'NetworkPolicy', objectName(service)));
      expect(policy).not.toMatch(/2638\d/);
    }
  });

  it('gives every Redis service the sentinels, the master name, the user and the password from existingSecret', () => {
    const objects = renderChart([
      ...production,
      ...sentinelSets,
      ...sets('redis.sentinel.existingSecret=custos-redis-sentinel'),
    ]);
    for (const service of REDIS_SERVICES) {
      const env = serviceEnv(objects, service);
      expect({
        service,
        sentinels: env.get('REDIS_SENTINELS'),
        master: env.get('REDIS_SENTINEL_MASTER'),
        user: env.get('REDIS_SENTINEL_USERNAME'),
        password: env.get('REDIS_SENTINEL_PASSWORD'),
      }).toEqual({
        service,
        sentinels: {
          name: 'REDIS_SENTINELS',
          value: 'sentinel-0.redis:26379,sentinel-1.redis:26379,10.20.1.9:26380',
        },
        master: { name: 'REDIS_SENTINEL_MASTER', value: 'custos-master' },
        user: { name: 'REDIS_SENTINEL_USERNAME', value: 'sentinel-user' },
        password: {
          name: 'REDIS_SENTINEL_PASSWORD',
          valueFrom: { secretKeyRef: { name: 'custos-redis-sentinel', key: 'sentinel-password' } },
        },
      });
    }
    // Still no Secret rendered in production: the password is the operator's.
    expect(ofKind(objects, 'Secret')).toEqual([]);
  });

  it('keeps an inline password in the chart Secret, never as a plain value', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      ...sentinelSets,
      ...sets('redis.sentinel.password=sentinel-pw-123'),
    ]);
    const env = serviceEnv(objects, 'gateway');
    const ref = env.get('REDIS_SENTINEL_PASSWORD').valueFrom.secretKeyRef;
    expect(ref).toEqual({ name: 'custos-env', key: 'redis-sentinel-password' });
    expect(renderedSecretValue(objects, ref)).toBe('sentinel-pw-123');
    expect(JSON.stringify(ofKind(objects, 'Deployment'))).not.toContain('sentinel-pw-123');
  });

  it('lets every Redis service reach each sentinel port where Redis is, and the in-cluster Redis policy admits them', () => {
    const objects = renderChart([
      ...production,
      ...sentinelSets,
      ...sets(
        'networkPolicy.redis.inCluster.enabled=true',
        'networkPolicy.redis.inCluster.namespace=redis',
        'networkPolicy.redis.inCluster.podSelector.matchLabels.app=redis',
      ),
    ]);
    expect(validationErrors(objects)).toEqual([]);
    const sentinelPorts = [
      { port: 26379, protocol: 'TCP' },
      { port: 26380, protocol: 'TCP' },
    ];
    for (const service of REDIS_SERVICES) {
      const egress = named(objects, 'NetworkPolicy', objectName(service)).spec.egress;
      const rule = egress.find((r: Json) => JSON.stringify(r.ports) === JSON.stringify(sentinelPorts));
      expect({ service, to: rule?.to }).toEqual({
        service,
        to: [
          { ipBlock: { cidr: '10.20.1.0/24' } },
          {
            podSelector: { matchLabels: { app: 'redis' } },
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'redis' } },
          },
        ],
      });
    }
    const clients = named(objects, 'NetworkPolicy', 'custos-redis-clients');
    expect(clients.spec.ingress[0].ports).toEqual([{ port: 6380, protocol: 'TCP' }, ...sentinelPorts]);
  });

  it('refuses sentinels without hosts, and a host without a port', () => {
    let r = renderFailure([...REQUIRED_SETS, ...sets('redis.sentinel.enabled=true')]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/redis.sentinel.hosts/);
    r = renderFailure([
      ...REQUIRED_SETS,
      ...sets('redis.sentinel.enabled=true', 'redis.sentinel.hosts={sentinel-0}'),
    ]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/sentinel\/hosts/);
  });
});
