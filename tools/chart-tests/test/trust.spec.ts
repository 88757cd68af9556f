// Every part of the mesh proves who it is (issue 13), as the chart wires it: each service with a
// database connects with its own role from its own Secret and never gets the owner's URL, which
// only the migration Job has; each service mounts its own mesh certificate (cert-manager
// Certificate with URI SAN spiffe://custos/<service>) as a whole Secret volume; each service that
// uses NATS has its own user; identity gets the MFA key; the local KMS needs kms.allowLocal (false
// by default); a database role without a password needs postgres.allowPasswordlessRoles.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import yaml from 'js-yaml';
import {
  DATABASE_ROLES,
  DATABASE_SERVICES,
  NATS_SERVICES,
  NATS_USERS,
  REDIS_SERVICES,
  SERVICES,
} from './facts';
import {
  type Json,
  type K8sObject,
  REQUIRED_SETS,
  TEST_MFA_KEY,
  chartDir,
  named,
  objectName,
  ofKind,
  release,
  renderChart,
  renderFailure,
  renderedSecretValue,
  scenarios,
  serviceEnv,
  sets,
  testDatabasePassword,
  testNatsPassword,
} from './helm';

type Ref = { name: string; key: string };

const [defaults, production] = scenarios;
const TLS_DIR = '/etc/custos/tls';

/** Every secretKeyRef of a pod spec's containers (env and envFrom), with where it is used. */
function secretRefsOf(podSpec: Json): Array<{ variable: string; ref: Ref }> {
  const refs: Array<{ variable: string; ref: Ref }> = [];
  for (const c of [...(podSpec.initContainers ?? []), ...podSpec.containers]) {
    for (const e of c.env ?? [])
      if (e.valueFrom?.secretKeyRef) refs.push({ variable: e.name, ref: e.valueFrom.secretKeyRef });
    for (const f of c.envFrom ?? [])
      if (f.secretRef) refs.push({ variable: '(envFrom)', ref: { name: f.secretRef.name, key: '*' } });
  }
  return refs;
}

/** The Secret names a Deployment's pod reads: env references and Secret volumes. */
function secretNamesOf(objects: K8sObject[], service: string): string[] {
  const pod = named(objects, 'Deployment', objectName(service)).spec.template.spec;
  const names = secretRefsOf(pod).map((r) => r.ref.name);
  for (const v of pod.volumes ?? []) if (v.secret) names.push(v.secret.secretName);
  return names;
}

function jobContainer(objects: K8sObject[], service: string): Json {
  const [job] = ofKind(objects, 'Job');
  return job!.spec.template.spec.initContainers.find((c: Json) => c.name === `migrate-${service}`);
}

function jobEnv(objects: K8sObject[], service: string): Map<string, Json> {
  return new Map(jobContainer(objects, service).env.map((e: Json) => [e.name, e]));
}

describe.each([
  {
    ...defaults!,
    ownerRef: { name: 'custos-env-migrate', key: 'database-url' },
    ownerUrl: 'postgres://custos@postgres:5432/custos',
    credentials: (s: string) => ({ name: `custos-${s}-credentials` }),
    // Inline role passwords (REQUIRED_SETS): the Job sets them from its hook Secret.
    jobPassword: (s: string): Ref | undefined => ({
      name: 'custos-env-migrate',
      key: `${s}-database-password`,
    }),
  },
  {
    ...production!,
    ownerRef: { name: 'custos-postgres-owner', key: 'database-url' },
    ownerUrl: undefined,
    credentials: (s: string) => ({ name: `custos-${s}-credentials` }),
    jobPassword: (s: string): Ref | undefined => ({
      name: `custos-${s}-credentials`,
      key: 'database-password',
    }),
  },
])('trust wiring rendered with $label', ({ args, ownerRef, ownerUrl, credentials, jobPassword }) => {
  let objects: K8sObject[];
  beforeAll(() => {
    objects = renderChart(args);
  });

  describe('database roles', () => {
    it.each(DATABASE_SERVICES)(
      '%s: DATABASE_URL comes from its own Secret, connecting as its role',
      (service) => {
        const ref: Ref = serviceEnv(objects, service).get('DATABASE_URL').valueFrom.secretKeyRef;
        expect(ref).toEqual({ ...credentials(service), key: 'database-url' });
        expect(ref).not.toEqual(ownerRef);
        const url = renderedSecretValue(objects, ref);
        if (ownerUrl) {
          // Derived from the owner's URL: same server and database, the service's own role.
          const derived = new URL(url!);
          const owner = new URL(ownerUrl);
          expect(derived.username).toBe(DATABASE_ROLES[service as keyof typeof DATABASE_ROLES]);
          expect(derived.username).not.toBe(owner.username);
          expect(derived.password).toBe(testDatabasePassword(service));
          expect([derived.protocol, derived.host, derived.pathname]).toEqual([
            owner.protocol,
            owner.host,
            owner.pathname,
          ]);
        } else {
          expect(url).toBeUndefined(); // an existing Secret: the chart renders none
        }
      },
    );

    it('no two services share a database Secret reference', () => {
      const refs = DATABASE_SERVICES.map((s) =>
        JSON.stringify(serviceEnv(objects, s).get('DATABASE_URL').valueFrom.secretKeyRef),
      );
      expect(new Set(refs).size).toBe(DATABASE_SERVICES.length);
    });

    it('no service reads the owner’s Secret, by env, envFrom or volume; the gateway has no database', () => {
      for (const service of SERVICES) {
        const pod = named(objects, 'Deployment', objectName(service)).spec.template.spec;
        const owner = secretRefsOf(pod).filter(
          (r) => r.ref.name === ownerRef.name && (r.ref.key === ownerRef.key || r.ref.key === '*'),
        );
        expect({ service, owner }).toEqual({ service, owner: [] });
        const env = serviceEnv(objects, service);
        for (const v of ['DATABASE_SERVICE_ROLE', 'DATABASE_SERVICE_PASSWORD', 'MIGRATE_ON_START'])
          expect({ service, v, has: env.has(v) }).toEqual({ service, v, has: false });
      }
      expect(serviceEnv(objects, 'gateway').has('DATABASE_URL')).toBe(false);
      if (ownerUrl) {
        // The owner's URL is in the Job's hook Secret only, not in any Secret a service reads.
        const read = new Set(SERVICES.flatMap((s) => secretNamesOf(objects, s)));
        for (const secret of ofKind(objects, 'Secret')) {
          const values = Object.values(secret.data ?? {}).map((v) =>
            Buffer.from(v as string, 'base64').toString(),
          );
          if (values.includes(ownerUrl)) expect(read.has(secret.metadata.name)).toBe(false);
        }
      }
    });

    it.each(DATABASE_SERVICES)(
      '%s: the migration Job runs as the owner and provisions its role',
      (service) => {
        const env = jobEnv(objects, service);
        expect(env.get('DATABASE_URL').valueFrom.secretKeyRef).toEqual(ownerRef);
        expect(env.get('DATABASE_SERVICE_ROLE')).toEqual({
          name: 'DATABASE_SERVICE_ROLE',
          value: DATABASE_ROLES[service as keyof typeof DATABASE_ROLES],
        });
        expect(env.get('DATABASE_SERVICE_PASSWORD')?.valueFrom?.secretKeyRef).toEqual(jobPassword(service));
        // The Job needs no mesh certificate, NATS or service secrets.
        expect([...env.keys()].sort()).toEqual(
          ['DATABASE_SERVICE_PASSWORD', 'DATABASE_SERVICE_ROLE', 'DATABASE_URL', 'LOG_LEVEL'].filter(
            (k) => k !== 'DATABASE_SERVICE_PASSWORD' || jobPassword(service),
          ),
        );
      },
    );
  });

  describe('mesh certificates', () => {
    it.each(SERVICES)(
      '%s: a Certificate with URI SAN spiffe://custos/%s for server and client auth',
      (service) => {
        const cert = named(objects, 'Certificate', objectName(service));
        expect(cert.apiVersion).toBe('cert-manager.io/v1');
        expect(cert.spec.uris).toEqual([`spiffe://custos/${service}`]);
        expect(cert.spec.usages).toEqual(expect.arrayContaining(['server auth', 'client auth']));
        const svc = objectName(service);
        expect(cert.spec.dnsNames).toEqual([
          svc,
          `${svc}.${release.namespace}`,
          `${svc}.${release.namespace}.svc`,
          `${svc}.${release.namespace}.svc.cluster.local`,
          // The headless gRPC Service the peers dial.
          `${svc}-grpc`,
          `${svc}-grpc.${release.namespace}`,
          `${svc}-grpc.${release.namespace}.svc`,
          `${svc}-grpc.${release.namespace}.svc.cluster.local`,
        ]);
        expect(cert.spec.issuerRef).toEqual({
          name: 'custos-mesh-ca',
          kind: 'Issuer',
          group: 'cert-manager.io',
        });
        expect(cert.spec.privateKey).toMatchObject({ rotationPolicy: 'Always' });
        const hours = (d: string) => Number(d.replace(/h$/, ''));
        expect(hours(cert.spec.renewBefore)).toBeGreaterThan(0);
        expect(hours(cert.spec.renewBefore)).toBeLessThan(hours(cert.spec.duration));
        // The Secret it writes is the one the service mounts.
        const pod = named(objects, 'Deployment', objectName(service)).spec.template.spec;
        expect(pod.volumes.find((v: Json) => v.name === 'mesh-tls').secret.secretName).toBe(
          cert.spec.secretName,
        );
      },
    );

    it('no two services share a certificate or a Secret', () => {
      const certs = ofKind(objects, 'Certificate');
      expect(new Set(certs.map((c) => c.spec.secretName)).size).toBe(SERVICES.length);
      expect(new Set(certs.map((c) => c.spec.uris[0])).size).toBe(SERVICES.length);
    });

    it.each(SERVICES)(
      '%s: mounts the whole certificate Secret (no subPath) and points GRPC_TLS_* into it',
      (service) => {
        const pod = named(objects, 'Deployment', objectName(service)).spec.template.spec;
        const [container] = pod.containers;
        const volume = pod.volumes.find((v: Json) => v.name === 'mesh-tls');
        expect(volume.secret.items.map((i: Json) => [i.key, i.path])).toEqual([
          ['tls.crt', 'tls.crt'],
          ['tls.key', 'tls.key'],
          ['ca.crt', 'ca.crt'],
        ]);
        // Readable by the pod's group (fsGroup) only, never by others.
        expect(volume.secret.defaultMode & 0o007).toBe(0);
        expect(container.volumeMounts).toContainEqual({
          name: 'mesh-tls',
          mountPath: TLS_DIR,
          readOnly: true,
        });
        // A subPath mount is a copy the kubelet never updates: a renewed certificate would not arrive.
        for (const c of [...(pod.initContainers ?? []), ...pod.containers])
          for (const m of c.volumeMounts ?? [])
            expect({ mount: m.name, subPath: m.subPath }).toEqual({ mount: m.name });
        const env = serviceEnv(objects, service);
        expect(env.get('GRPC_TLS_CA_FILE')?.value).toBe(`${TLS_DIR}/ca.crt`);
        expect(env.get('GRPC_TLS_CERT_FILE')?.value).toBe(`${TLS_DIR}/tls.crt`);
        expect(env.get('GRPC_TLS_KEY_FILE')?.value).toBe(`${TLS_DIR}/tls.key`);
      },
    );
  });

  describe('NATS users', () => {
    it.each(NATS_SERVICES)('%s: its own NATS_USER and NATS_PASSWORD from its own Secret', (service) => {
      const env = serviceEnv(objects, service);
      expect(env.get('NATS_USER')).toEqual({ name: 'NATS_USER', value: NATS_USERS[service] });
      const ref: Ref = env.get('NATS_PASSWORD').valueFrom.secretKeyRef;
      expect(ref).toEqual({ ...credentials(service), key: 'nats-password' });
      const password = renderedSecretValue(objects, ref);
      if (ownerUrl) expect(password).toBe(testNatsPassword(service));
      else expect(password).toBeUndefined();
    });

    it('the gateway has no NATS credentials; no two services share a user or a password', () => {
      const gateway = serviceEnv(objects, 'gateway');
      expect(['NATS_URL', 'NATS_USER', 'NATS_PASSWORD'].filter((v) => gateway.has(v))).toEqual([]);
      const users = NATS_SERVICES.map((s) => serviceEnv(objects, s).get('NATS_USER').value);
      expect(new Set(users).size).toBe(NATS_SERVICES.length);
      const refs = NATS_SERVICES.map((s) =>
        JSON.stringify(serviceEnv(objects, s).get('NATS_PASSWORD').valueFrom),
      );
      expect(new Set(refs).size).toBe(NATS_SERVICES.length);
    });
  });

  it('each service’s credentials Secret is read by that service only', () => {
    for (const owner of DATABASE_SERVICES) {
      const secret = credentials(owner).name;
      const readers = SERVICES.filter((s) => secretNamesOf(objects, s).includes(secret));
      expect({ secret, readers }).toEqual({ secret, readers: [owner] });
    }
  });

  it('REDIS_URL goes to the services that use Redis, and no other', () => {
    const withRedis = SERVICES.filter((s) => serviceEnv(objects, s).has('REDIS_URL'));
    expect(withRedis.sort()).toEqual([...REDIS_SERVICES].sort());
  });

  it('MFA_SECRET_KEY reaches identity only, by Secret reference', () => {
    const ref = serviceEnv(objects, 'identity').get('MFA_SECRET_KEY');
    expect(Object.keys(ref.valueFrom)).toEqual(['secretKeyRef']);
    if (ownerUrl) expect(renderedSecretValue(objects, ref.valueFrom.secretKeyRef)).toBe(TEST_MFA_KEY);
    else expect(ref.valueFrom.secretKeyRef).toEqual({ name: 'custos-mfa', key: 'mfa-secret-key' });
    // Its own key, not the token-signing KEK's.
    expect(ref.valueFrom).not.toEqual(serviceEnv(objects, 'identity').get('TOKEN_SIGNING_KEK').valueFrom);
    for (const s of SERVICES.filter((x) => x !== 'identity'))
      expect({ s, has: serviceEnv(objects, s).has('MFA_SECRET_KEY') }).toEqual({ s, has: false });
  });
});

describe('KMS: the local provider is for development only', () => {
  const withoutAllowLocal = REQUIRED_SETS.filter(
    (s, i, all) => s !== 'kms.allowLocal=true' && all[i + 1] !== 'kms.allowLocal=true',
  );

  it('values.yaml defaults kms.allowLocal to false, so a plain install refuses the local KMS', () => {
    const values = yaml.load(readFileSync(path.join(chartDir, 'values.yaml'), 'utf8')) as Json;
    expect(values.kms).toMatchObject({ provider: 'local', allowLocal: false });
    expect(withoutAllowLocal).toHaveLength(REQUIRED_SETS.length - 2);
    const r = renderFailure(withoutAllowLocal);
    expect(r.status).not.toBe(0);
    // The refusal tells an evaluator how to go on: allowLocal for a throwaway install, else a KMS.
    expect(r.stderr).toContain('kms.allowLocal=true');
    expect(r.stderr).toContain('throwaway');
    expect(r.stderr).toContain('aws-kms');
    expect(r.stderr).toContain('pkcs11');
  });

  it('with kms.allowLocal=true (a throwaway install) local gets KMS_ALLOW_LOCAL on vault-crypto only', () => {
    const objects = renderChart(REQUIRED_SETS);
    expect(serviceEnv(objects, 'vault-crypto').get('KMS_PROVIDER')?.value).toBe('local');
    expect(serviceEnv(objects, 'vault-crypto').get('KMS_ALLOW_LOCAL')).toEqual({
      name: 'KMS_ALLOW_LOCAL',
      value: 'true',
    });
    for (const s of SERVICES.filter((x) => x !== 'vault-crypto'))
      expect({ s, has: serviceEnv(objects, s).has('KMS_ALLOW_LOCAL') }).toEqual({ s, has: false });
  });

  it('values-production.yaml uses aws-kms, without KMS_ALLOW_LOCAL or a local master key', () => {
    const env = serviceEnv(renderChart(production!.args), 'vault-crypto');
    expect(env.get('KMS_PROVIDER')?.value).toBe('aws-kms');
    expect(env.get('AWS_KMS_KEY_ID')?.value).toMatch(/^arn:aws:kms:/);
    expect(env.has('KMS_ALLOW_LOCAL')).toBe(false);
    expect(env.has('LOCAL_KMS_MASTER_KEY')).toBe(false);
  });

  it('values-production.yaml refuses to render with the local provider', () => {
    const r = renderFailure([...production!.args, ...sets('kms.provider=local')]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(
      'kms: provider "local" keeps the master key of every stored secret in a Kubernetes Secret',
    );
    expect(r.stderr).toContain('kms.allowLocal=true');
  });

  it('local with kms.allowLocal=false is refused; another provider never gets KMS_ALLOW_LOCAL', () => {
    expect(renderFailure([...REQUIRED_SETS, ...sets('kms.allowLocal=false')]).stderr).toContain(
      'development only',
    );
    const env = serviceEnv(
      renderChart([...REQUIRED_SETS, ...sets('kms.provider=aws-kms', 'kms.aws.keyId=alias/custos')]),
      'vault-crypto',
    );
    expect(env.has('KMS_ALLOW_LOCAL')).toBe(false);
  });
});

describe('MFA key', () => {
  const withoutMfa = REQUIRED_SETS.filter(
    (s, i, all) => !s.startsWith('mfa.') && all[i + 1]?.startsWith('mfa.') !== true,
  );

  it('is required, and the refusal says how to give it', () => {
    expect(withoutMfa).not.toContain(expect.stringMatching(/^mfa\./));
    const r = renderFailure(withoutMfa);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('mfa: identity needs MFA_SECRET_KEY');
    expect(r.stderr).toContain('set mfa.existingSecret (recommended) or mfa.secretKey');
  });

  it('comes from mfa.existingSecret, which then keeps it out of the chart’s Secrets', () => {
    const objects = renderChart([
      ...withoutMfa,
      ...sets('mfa.existingSecret=my-mfa', 'mfa.existingSecretKey=k'),
    ]);
    expect(serviceEnv(objects, 'identity').get('MFA_SECRET_KEY').valueFrom.secretKeyRef).toEqual({
      name: 'my-mfa',
      key: 'k',
    });
    for (const s of ofKind(objects, 'Secret'))
      expect(Object.keys(s.data ?? {})).not.toContain('mfa-secret-key');
  });

  it('refuses a key that is not base64 of 32 bytes', () => {
    const r = renderFailure([...withoutMfa, ...sets('mfa.secretKey=c2hvcnQ=')]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/secretKey/);
  });
});

describe('database credential values', () => {
  it('inline passwords: the derived URL carries role and password, the Job sets the password', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      ...sets(
        'postgres.migrationUrl=postgres://owner:ownerpw@db.internal:6432/custos?sslmode=require',
        'postgres.serviceCredentials.audit.password=audit-pw.1',
      ),
    ]);
    const url = new URL(
      renderedSecretValue(objects, serviceEnv(objects, 'audit').get('DATABASE_URL').valueFrom.secretKeyRef)!,
    );
    expect([url.username, url.password, url.host, url.pathname, url.search]).toEqual([
      'custos_audit',
      'audit-pw.1',
      'db.internal:6432',
      '/custos',
      '?sslmode=require',
    ]);
    // The Job gets it from its hook Secret, created before it runs.
    const ref = jobEnv(objects, 'audit').get('DATABASE_SERVICE_PASSWORD').valueFrom.secretKeyRef;
    expect(ref).toEqual({ name: 'custos-env-migrate', key: 'audit-database-password' });
    expect(renderedSecretValue(objects, ref)).toBe('audit-pw.1');
  });

  it('an empty password without existingSecret (a passwordless LOGIN role) is refused by name', () => {
    for (const manageRoles of ['true', 'false']) {
      const r = renderFailure([
        ...REQUIRED_SETS,
        ...sets(`postgres.manageRoles=${manageRoles}`, 'postgres.serviceCredentials.billing.password='),
      ]);
      expect({ manageRoles, status: r.status }).not.toEqual({ manageRoles, status: 0 });
      expect(r.stderr).toContain('postgres.serviceCredentials.billing');
      expect(r.stderr).toContain('without a password');
      expect(r.stderr).toContain('postgres.allowPasswordlessRoles=true');
    }
  });

  it('postgres.allowPasswordlessRoles=true (trust auth, development) connects without a password', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      ...sets('postgres.allowPasswordlessRoles=true', 'postgres.serviceCredentials.billing.password='),
    ]);
    const billing = new URL(
      renderedSecretValue(
        objects,
        serviceEnv(objects, 'billing').get('DATABASE_URL').valueFrom.secretKeyRef,
      )!,
    );
    expect([billing.username, billing.password]).toEqual(['custos_billing', '']);
    expect(jobEnv(objects, 'billing').has('DATABASE_SERVICE_PASSWORD')).toBe(false);
    // The others keep their passwords.
    expect(jobEnv(objects, 'audit').has('DATABASE_SERVICE_PASSWORD')).toBe(true);
  });

  it('a service with its own Secret or its own DATABASE_URL needs no inline password', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      ...sets(
        'postgres.serviceCredentials.billing.password=',
        'postgres.serviceCredentials.billing.existingSecret=billing-db',
        'postgres.serviceCredentials.signer.password=',
        'services.signer.secretEnv.DATABASE_URL.name=signer-db',
        'services.signer.secretEnv.DATABASE_URL.key=url',
      ),
    ]);
    expect(serviceEnv(objects, 'billing').get('DATABASE_URL').valueFrom.secretKeyRef).toEqual({
      name: 'billing-db',
      key: 'database-url',
    });
    expect(serviceEnv(objects, 'signer').get('DATABASE_URL').valueFrom.secretKeyRef).toEqual({
      name: 'signer-db',
      key: 'url',
    });
  });

  it('manageRoles=false (roles made by the DBA): the Job sets no password', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      ...sets(
        'postgres.manageRoles=false',
        'postgres.serviceCredentials.audit.password=audit-pw',
        'postgres.serviceCredentials.identity.existingSecret=id-db',
      ),
    ]);
    for (const s of DATABASE_SERVICES)
      expect({ s, has: jobEnv(objects, s).has('DATABASE_SERVICE_PASSWORD') }).toEqual({ s, has: false });
    const hook = named(objects, 'Secret', 'custos-env-migrate');
    expect(Object.keys(hook.data)).toEqual(['database-url']);
  });

  it('a service’s existingSecret gives its DATABASE_URL and, with manageRoles, the Job’s password', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      ...sets(
        'postgres.serviceCredentials.policy.existingSecret=policy-db',
        'postgres.serviceCredentials.policy.existingSecretKey=url',
        'postgres.serviceCredentials.policy.existingSecretPasswordKey=pw',
      ),
    ]);
    expect(serviceEnv(objects, 'policy').get('DATABASE_URL').valueFrom.secretKeyRef).toEqual({
      name: 'policy-db',
      key: 'url',
    });
    expect(jobEnv(objects, 'policy').get('DATABASE_SERVICE_PASSWORD').valueFrom.secretKeyRef).toEqual({
      name: 'policy-db',
      key: 'pw',
    });
    expect(Object.keys(named(objects, 'Secret', 'custos-policy-credentials').data)).toEqual([
      'nats-password',
      'redis-url',
    ]);
  });

  it('with the owner’s URL in a Secret, a service without its own Secret is refused by name', () => {
    const r = renderFailure([
      ...REQUIRED_SETS,
      ...sets('postgres.migrationUrl=', 'postgres.migrationExistingSecret=owner'),
    ]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/postgres\.serviceCredentials\.[a-z-]+: set existingSecret/);
  });

  it('the removed shared postgres.url is refused, naming what replaced it', () => {
    const r = renderFailure([...REQUIRED_SETS, ...sets('postgres.url=postgres://custos@db/custos')]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('postgres.url was removed');
    expect(r.stderr).toContain('postgres.migrationUrl');
    expect(r.stderr).toContain('postgres.serviceCredentials');
  });

  it.each([
    ['a role that is not an identifier', 'postgres.serviceCredentials.audit.role=custos-audit'],
    [
      'an inline password that would need URL escaping',
      'postgres.serviceCredentials.audit.password=p@ss/word',
    ],
    [
      'credentials for the gateway, which has no database',
      'postgres.serviceCredentials.gateway.role=custos_gateway',
    ],
  ])('the schema refuses %s', (_label, set) => {
    const r = renderFailure([...REQUIRED_SETS, ...sets(set)]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/schema/);
  });
});

describe('NATS credential values', () => {
  const withoutNats = (service: string) =>
    REQUIRED_SETS.filter(
      (s, i, all) =>
        !s.startsWith(`nats.users.${service}.`) && !all[i + 1]?.startsWith(`nats.users.${service}.`),
    );

  it('a service without its NATS password is refused, naming the value', () => {
    const r = renderFailure(withoutNats('signer'));
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('nats: signer needs its NATS password: set nats.users.signer.existingSecret');
  });

  it('an existing Secret gives it instead', () => {
    const objects = renderChart([
      ...withoutNats('signer'),
      ...sets('nats.users.signer.existingSecret=signer-nats'),
    ]);
    expect(serviceEnv(objects, 'signer').get('NATS_PASSWORD').valueFrom.secretKeyRef).toEqual({
      name: 'signer-nats',
      key: 'nats-password',
    });
  });

  it.each([
    ['starting with a digit (NATS would read a number)', '1234567890abcdefgh'],
    ['shorter than 16 characters', 'pshort'],
    ['with a character NATS reads as a comment', 'pabcdefgh#ijklmnop'],
  ])('the schema refuses a NATS password %s', (_label, password) => {
    const r = renderFailure([...REQUIRED_SETS, ...sets(`nats.users.audit.password=${password}`)]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/schema/);
  });

  it('nats.auth.enabled=false (development): no credentials and no authorization ConfigMap', () => {
    const objects = renderChart([...withoutNats('audit'), ...sets('nats.auth.enabled=false')]);
    for (const s of NATS_SERVICES) {
      const env = serviceEnv(objects, s);
      expect({ s, user: env.has('NATS_USER'), pw: env.has('NATS_PASSWORD') }).toEqual({
        s,
        user: false,
        pw: false,
      });
      expect(env.get('NATS_URL')).toBeDefined();
    }
    expect(ofKind(objects, 'ConfigMap').map((c) => c.metadata.name)).not.toContain(
      'custos-nats-authorization',
    );
  });
});

describe('mesh certificate values', () => {
  it('without cert-manager every service needs an existing Secret, named in the refusal', () => {
    const r = renderFailure([...REQUIRED_SETS, ...sets('mtls.certManager.enabled=false')]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/mtls: [a-z-]+ has no certificate: set mtls\.existingSecrets\.[a-z-]+/);
  });

  it('existing Secrets replace the Certificates, one service at a time', () => {
    const objects = renderChart([...REQUIRED_SETS, ...sets('mtls.existingSecrets.audit=audit-mesh-cert')]);
    const names = ofKind(objects, 'Certificate').map((c) => c.metadata.name);
    expect(names).not.toContain(objectName('audit'));
    expect(names).toHaveLength(SERVICES.length - 1);
    const pod = named(objects, 'Deployment', objectName('audit')).spec.template.spec;
    expect(pod.volumes.find((v: Json) => v.name === 'mesh-tls').secret.secretName).toBe('audit-mesh-cert');

    const all = renderChart([
      ...REQUIRED_SETS,
      ...sets(
        'mtls.certManager.enabled=false',
        ...SERVICES.map((s) => `mtls.existingSecrets.${s}=${s}-cert`),
      ),
    ]);
    expect(ofKind(all, 'Certificate')).toEqual([]);
  });

  it('the issuer, lifetime and key come from the values', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      ...sets(
        'mtls.certManager.issuerRef.name=platform-ca',
        'mtls.certManager.issuerRef.kind=ClusterIssuer',
        'mtls.certManager.duration=48h',
        'mtls.certManager.renewBefore=16h',
        'mtls.certManager.privateKey.algorithm=RSA',
        'mtls.certManager.privateKey.size=3072',
      ),
    ]);
    const cert = named(objects, 'Certificate', objectName('policy'));
    expect(cert.spec).toMatchObject({
      issuerRef: { name: 'platform-ca', kind: 'ClusterIssuer', group: 'cert-manager.io' },
      duration: '48h',
      renewBefore: '16h',
      privateKey: { algorithm: 'RSA', size: 3072 },
    });
    expect(cert.spec.usages).toContain('key encipherment');
  });
});

describe('TLS to Redis and NATS with a private CA', () => {
  it('redis.tls.caSecret is mounted into the Redis users only, with REDIS_TLS_CA_FILE', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      ...sets('redis.tls.caSecret=redis-ca', 'nats.tls.caSecret=nats-ca'),
    ]);
    for (const s of SERVICES) {
      const pod = named(objects, 'Deployment', objectName(s)).spec.template.spec;
      const env = serviceEnv(objects, s);
      const redisVolume = pod.volumes.find((v: Json) => v.name === 'redis-ca');
      const natsVolume = pod.volumes.find((v: Json) => v.name === 'nats-ca');
      if (REDIS_SERVICES.includes(s)) {
        expect(redisVolume.secret).toEqual({
          secretName: 'redis-ca',
          items: [{ key: 'ca.crt', path: 'ca.crt' }],
        });
        expect(pod.containers[0].volumeMounts).toContainEqual({
          name: 'redis-ca',
          mountPath: '/etc/custos/redis-ca',
          readOnly: true,
        });
        expect(env.get('REDIS_TLS_CA_FILE')?.value).toBe('/etc/custos/redis-ca/ca.crt');
      } else {
        expect({ s, redisVolume, ca: env.has('REDIS_TLS_CA_FILE') }).toEqual({
          s,
          redisVolume: undefined,
          ca: false,
        });
      }
      if ((NATS_SERVICES as string[]).includes(s)) {
        expect(natsVolume.secret.secretName).toBe('nats-ca');
        expect(env.get('NATS_TLS_CA_FILE')?.value).toBe('/etc/custos/nats-ca/ca.crt');
      } else {
        expect({ s, natsVolume }).toEqual({ s, natsVolume: undefined });
      }
    }
  });
});
