// The schema migrations run as one Helm hook Job before install and upgrade: one init container
// per service with a database, each `node dist/migrate.js` in that service's image.
import { DATABASE_SERVICES } from './facts';
import { type K8sObject, REQUIRED_SETS, objectName, ofKind, renderChart, scenarios, type Json } from './helm';

describe.each(scenarios)('migration Job rendered with $label', ({ args }) => {
  let objects: K8sObject[];
  let job: K8sObject;
  beforeAll(() => {
    objects = renderChart(args);
    const jobs = ofKind(objects, 'Job');
    expect(jobs).toHaveLength(1);
    job = jobs[0]!;
  });

  it('is a pre-install/pre-upgrade hook replaced before each run', () => {
    expect(job.metadata.name).toBe('custos-migrate');
    expect(job.metadata.annotations).toMatchObject({
      'helm.sh/hook': 'pre-install,pre-upgrade',
      'helm.sh/hook-delete-policy': 'before-hook-creation',
    });
    expect(job.spec.template.spec.restartPolicy).toBe('Never');
    expect(job.spec.backoffLimit).toBeGreaterThanOrEqual(0);
    expect(job.spec.activeDeadlineSeconds).toBeGreaterThan(0);
  });

  it('migrates each of the eight database services with its own image, one after the other', () => {
    const init: Json[] = job.spec.template.spec.initContainers;
    expect(init.map((c) => c.name).sort()).toEqual(DATABASE_SERVICES.map((s) => `migrate-${s}`).sort());
    for (const c of init) {
      const service = c.name.replace(/^migrate-/, '');
      expect(c.command).toEqual(['node', 'dist/migrate.js']);
      const deployment = objects.find(
        (o) => o.kind === 'Deployment' && o.metadata.name === objectName(service),
      )!;
      expect(c.image).toBe(deployment.spec.template.spec.containers[0].image);
    }
    expect(init.map((c) => c.name)).not.toContain('migrate-gateway');
  });

  it('reads the owner’s DATABASE_URL from a Secret that exists when the hook runs', () => {
    const hookSecrets = ofKind(objects, 'Secret').filter((s) => s.metadata.annotations?.['helm.sh/hook']);
    for (const c of job.spec.template.spec.initContainers as Json[]) {
      const ref = c.env.find((e: Json) => e.name === 'DATABASE_URL')?.valueFrom?.secretKeyRef;
      expect(ref).toBeDefined();
      // Every migration runs as the same owner.
      expect(ref).toEqual(
        job.spec.template.spec.initContainers[0].env.find((e: Json) => e.name === 'DATABASE_URL').valueFrom
          .secretKeyRef,
      );
      const chartSecret = ofKind(objects, 'Secret').find((s) => s.metadata.name === ref.name);
      if (chartSecret) {
        // A Secret of this chart: it must be a hook that runs before the Job (lower weight).
        expect(hookSecrets).toContain(chartSecret);
        expect(chartSecret.metadata.annotations['helm.sh/hook']).toBe('pre-install,pre-upgrade');
        expect(Number(chartSecret.metadata.annotations['helm.sh/hook-weight'])).toBeLessThan(
          Number(job.metadata.annotations['helm.sh/hook-weight'] ?? 0),
        );
        expect(chartSecret.data[ref.key]).toBeDefined();
      } else {
        // Otherwise an existing Secret the operator created before installing.
        expect(ref).toEqual({ name: 'custos-postgres-owner', key: 'database-url' });
      }
    }
  });
});

describe('migrations.enabled=false', () => {
  it('renders no Job and no hook Secret', () => {
    const objects = renderChart([...REQUIRED_SETS, '--set', 'migrations.enabled=false']);
    expect(ofKind(objects, 'Job')).toEqual([]);
    expect(ofKind(objects, 'Secret').filter((s) => s.metadata.annotations?.['helm.sh/hook'])).toEqual([]);
  });
});

describe('extra volumes of a service', () => {
  it('are mounted in its Deployment and in its migration container (e.g. a Postgres CA bundle)', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      '--set',
      'services.audit.extraVolumes[0].name=pg-ca',
      '--set',
      'services.audit.extraVolumes[0].secret.secretName=pg-ca',
      '--set',
      'services.audit.extraVolumeMounts[0].name=pg-ca',
      '--set',
      'services.audit.extraVolumeMounts[0].mountPath=/etc/pg-ca',
    ]);
    const mount = { name: 'pg-ca', mountPath: '/etc/pg-ca' };
    const volume = { name: 'pg-ca', secret: { secretName: 'pg-ca' } };
    const deployment = objects.find(
      (o) => o.kind === 'Deployment' && o.metadata.name === objectName('audit'),
    )!;
    expect(deployment.spec.template.spec.volumes).toContainEqual(volume);
    expect(deployment.spec.template.spec.containers[0].volumeMounts).toContainEqual(mount);
    const job = ofKind(objects, 'Job')[0]!;
    expect(job.spec.template.spec.volumes).toContainEqual(volume);
    const init: Json[] = job.spec.template.spec.initContainers;
    expect(init.find((c) => c.name === 'migrate-audit').volumeMounts).toContainEqual(mount);
    expect(init.find((c) => c.name === 'migrate-billing').volumeMounts).not.toContainEqual(mount);
  });
});
