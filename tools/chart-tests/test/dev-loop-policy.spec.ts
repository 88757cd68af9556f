// The skaffold dev release (skaffold.yaml) on a cluster whose CNI enforces NetworkPolicies: identity's
// SMTP egress rule (networkPolicy.smtp) must let it reach the dev cluster's Mailpit
// (tools/skaffold/deps/mailpit.yaml) on its SMTP port, and nothing beyond it.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import yaml from 'js-yaml';
import { SERVICES } from './facts';
import { type Json, type K8sObject, named, objectName, renderChart, repoRoot } from './helm';

function devReleaseArgs(): string[] {
  const config = yaml.load(readFileSync(path.join(repoRoot, 'skaffold.yaml'), 'utf8')) as Json;
  const release = config.deploy.helm.releases[0];
  const values: Record<string, unknown> = release.setValues;
  const templates: Record<string, string> = release.setValueTemplates;
  return [
    ...Object.entries(values).flatMap(([k, v]) => ['--set', `${k}=${String(v)}`]),
    // skaffold fills each service's image reference; any reference does here.
    ...Object.keys(templates).flatMap((k) => ['--set', `${k}=custos-dev:0123abcd`]),
  ];
}

describe('skaffold dev release: identity reaches Mailpit through its NetworkPolicy', () => {
  const mailpit = (
    yaml.loadAll(readFileSync(path.join(repoRoot, 'tools/skaffold/deps/mailpit.yaml'), 'utf8')) as K8sObject[]
  ).filter(Boolean);
  const deployment = mailpit.find((o) => o.kind === 'Deployment')!;
  const podLabels: Record<string, string> = deployment.spec.template.metadata.labels;
  const smtpPort = deployment.spec.template.spec.containers[0].ports.find(
    (p: Json) => p.name === 'smtp',
  ).containerPort;
  let objects: K8sObject[];
  beforeAll(() => {
    objects = renderChart(devReleaseArgs());
  });

  it('identity’s SMTP rule selects the Mailpit pods on their SMTP port', () => {
    const egress = named(objects, 'NetworkPolicy', objectName('identity')).spec.egress as Json[];
    const smtp = egress.filter((r) => (r.ports ?? []).some((p: Json) => p.port === smtpPort));
    expect(smtp).toHaveLength(1);
    expect(smtp[0].ports).toEqual([{ port: smtpPort }]);
    const [peer, ...more] = smtp[0].to;
    expect(more).toEqual([]);
    // Same namespace (no namespaceSelector), and every label it asks for is on Mailpit's pods.
    expect(peer.namespaceSelector).toBeUndefined();
    expect(Object.entries(peer.podSelector.matchLabels).every(([k, v]) => podLabels[k] === v)).toBe(true);
    // The URL identity is given names that port.
    const env = new Map(
      named(objects, 'Deployment', objectName('identity')).spec.template.spec.containers[0].env.map(
        (e: Json) => [e.name, e],
      ),
    );
    expect(env.has('SMTP_URL')).toBe(true);
  });

  it('no other service reaches Mailpit', () => {
    for (const s of SERVICES.filter((x) => x !== 'identity')) {
      const egress = named(objects, 'NetworkPolicy', objectName(s)).spec.egress as Json[];
      expect({ s, smtp: egress.some((r) => (r.ports ?? []).some((p: Json) => p.port === smtpPort)) }).toEqual(
        { s, smtp: false },
      );
    }
  });
});
