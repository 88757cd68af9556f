// podSecurityContext / containerSecurityContext: overridable (OpenShift's restricted-v2 SCC assigns
// the uid, so values-openshift.yaml removes runAsUser, runAsGroup and fsGroup with null) while the
// Kubernetes "restricted" profile holds; the schema refuses overrides that would leave it.
import path from 'node:path';
import { SERVICES } from './facts';
import {
  type Json,
  type K8sObject,
  chartDir,
  named,
  objectName,
  ofKind,
  renderChart,
  renderFailure,
  scenarios,
  sets,
} from './helm';
import { validationErrors } from './validate';

const production = scenarios[1]!.args;
const openshift = [...production, '-f', path.join(chartDir, 'values-openshift.yaml')];

/** Every pod spec the chart renders: the Deployments' and the migration Job's. */
function podSpecs(objects: K8sObject[]): Array<[string, Json]> {
  return [...ofKind(objects, 'Deployment'), ...ofKind(objects, 'Job')].map((o) => [
    o.metadata.name,
    o.spec.template.spec,
  ]);
}

/** The checks of the Pod Security Standards' "restricted" profile that the chart's pods carry. */
function expectRestricted(name: string, pod: Json): void {
  expect({ name, pod: pod.securityContext }).toMatchObject({
    name,
    pod: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
  });
  for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
    const id = `${name}/${c.name}`;
    expect({ id, sc: c.securityContext }).toMatchObject({
      id,
      sc: {
        runAsNonRoot: true,
        allowPrivilegeEscalation: false,
        privileged: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      },
    });
    expect({ id, add: c.securityContext.capabilities.add }).toEqual({ id });
  }
}

describe('security contexts on OpenShift (values-openshift.yaml)', () => {
  let objects: K8sObject[];
  beforeAll(() => {
    objects = renderChart(openshift);
  });

  it('renders valid objects', () => {
    expect(validationErrors(objects)).toEqual([]);
  });

  it('sets no uid, gid or fsGroup anywhere and keeps the restricted profile', () => {
    const pods = podSpecs(objects);
    expect(pods.length).toBe(SERVICES.length + 1);
    for (const [name, pod] of pods) {
      expectRestricted(name, pod);
      for (const key of ['runAsUser', 'runAsGroup', 'fsGroup'])
        expect({ name, key, pod: pod.securityContext[key] }).toEqual({ name, key, pod: undefined });
      for (const c of [...(pod.initContainers ?? []), ...pod.containers])
        for (const key of ['runAsUser', 'runAsGroup'])
          expect({ c: c.name, key, v: c.securityContext[key] }).toEqual({ c: c.name, key, v: undefined });
    }
  });

  it('admits the OpenShift router, and resolves names with openshift-dns', () => {
    const policy = named(objects, 'NetworkPolicy', objectName('gateway'));
    expect(JSON.stringify(policy.spec.ingress)).toContain('policy-group.network.openshift.io/ingress');
    expect(policy.spec.egress[0].ports).toEqual([
      { port: 5353, protocol: 'UDP' },
      { port: 5353, protocol: 'TCP' },
    ]);
  });
});

describe('security context overrides', () => {
  it('accept what the restricted profile allows: container SELinux types, Localhost profiles that name a file', () => {
    const objects = renderChart([
      ...production,
      ...sets(
        'containerSecurityContext.seLinuxOptions.type=container_t',
        'podSecurityContext.seLinuxOptions.level=s0:c123\\,c456',
        'containerSecurityContext.seccompProfile.type=Localhost',
        'containerSecurityContext.seccompProfile.localhostProfile=profiles/custos.json',
        'containerSecurityContext.appArmorProfile.type=RuntimeDefault',
      ),
    ]);
    expect(validationErrors(objects)).toEqual([]);
    const sc = named(objects, 'Deployment', objectName('gateway')).spec.template.spec.containers[0]
      .securityContext;
    expect(sc.seccompProfile).toEqual({ type: 'Localhost', localhostProfile: 'profiles/custos.json' });
    expect(sc.seLinuxOptions).toEqual({ type: 'container_t' });
  });

  it('merge over the defaults: a value replaces, the rest stays', () => {
    const objects = renderChart([
      ...production,
      ...sets('podSecurityContext.runAsUser=1000700000', 'containerSecurityContext.runAsUser=1000700000'),
    ]);
    for (const [name, pod] of podSpecs(objects)) {
      expectRestricted(name, pod);
      expect(pod.securityContext).toMatchObject({ runAsUser: 1000700000, runAsGroup: 10001, fsGroup: 10001 });
      expect(pod.containers[0].securityContext).toMatchObject({ runAsUser: 1000700000, runAsGroup: 10001 });
    }
  });

  it.each([
    'containerSecurityContext.allowPrivilegeEscalation=true',
    'containerSecurityContext.privileged=true',
    'containerSecurityContext.readOnlyRootFilesystem=false',
    'containerSecurityContext.runAsNonRoot=null',
    'containerSecurityContext.capabilities.drop=null',
    'containerSecurityContext.capabilities.add={SYS_ADMIN}',
    'containerSecurityContext.seccompProfile.type=Unconfined',
    'containerSecurityContext.runAsUser=0',
    'podSecurityContext.runAsNonRoot=false',
    'podSecurityContext.seccompProfile=null',
    'podSecurityContext.sysctls[0].name=net.ipv4.ip_forward',
    'containerSecurityContext.seLinuxOptions.type=spc_t',
    'podSecurityContext.seLinuxOptions.type=unconfined_t',
    'podSecurityContext.seLinuxOptions.user=system_u',
    'containerSecurityContext.seLinuxOptions.role=system_r',
    'containerSecurityContext.appArmorProfile.type=Unconfined',
    'podSecurityContext.seccompProfile.type=Localhost',
    'containerSecurityContext.appArmorProfile.type=Localhost',
    'containerSecurityContext.seccompProfile.localhostProfile=profiles/x.json',
  ])('refuses %s (the restricted profile)', (set) => {
    const { status, stderr } = renderFailure([...production, '--set', set]);
    expect({ set, status }).toEqual({ set, status: 1 });
    expect(stderr).toMatch(/SecurityContext/);
  });
});
