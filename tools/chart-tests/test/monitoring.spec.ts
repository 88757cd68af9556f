// monitoring.*: ServiceMonitor / PodMonitor per service, the PrometheusRule built from
// files/prometheus-rules.yaml, the Grafana dashboard ConfigMap; each only when enabled, each valid
// against the Prometheus Operator's schemas, and scraping what the Services, pods and
// NetworkPolicies really offer.
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import yaml from 'js-yaml';
import { METRICS_PORT, SERVICES } from './facts';
import {
  type Json,
  type K8sObject,
  chartDir,
  named,
  objectName,
  ofKind,
  release,
  renderChart,
  renderFailure,
  runHelm,
  scenarios,
  sets,
} from './helm';
import { validationErrors } from './validate';

/** values-production.yaml with its monitoring objects off, so each test turns on what it checks. */
const production = [
  ...scenarios[1]!.args,
  ...sets(
    'monitoring.serviceMonitor.enabled=false',
    'monitoring.prometheusRule.enabled=false',
    'monitoring.grafanaDashboard.enabled=false',
  ),
];
const MONITORING_KINDS = ['ServiceMonitor', 'PodMonitor', 'PrometheusRule'];
const RULES_FILE = path.join(chartDir, 'files', 'prometheus-rules.yaml');
const DASHBOARD_FILE = path.join(chartDir, 'files', 'grafana-dashboard.json');

/** A copy of the chart with our own rules and dashboard files, so the wiring is tested whatever the chart ships. */
function chartCopyWithFiles(rules: string, dashboard: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'custos-chart-'));
  cpSync(chartDir, dir, { recursive: true });
  writeFileSync(path.join(dir, 'files', 'prometheus-rules.yaml'), rules);
  writeFileSync(path.join(dir, 'files', 'grafana-dashboard.json'), dashboard);
  return dir;
}

function renderDir(dir: string, args: string[]): K8sObject[] {
  const { status, stdout, stderr } = runHelm([
    'template',
    release.name,
    dir,
    '--namespace',
    release.namespace,
    ...args,
  ]);
  if (status !== 0) throw new Error(stderr);
  return yaml.loadAll(stdout).filter((d): d is K8sObject => d !== null && typeof d === 'object');
}

/** Whether every matchLabels entry of `selector` is among `labels`. */
function selects(selector: Json, labels: Record<string, string>): boolean {
  return Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
}

describe('monitoring objects are off by default', () => {
  it.each([
    { label: 'default values', args: scenarios[0]!.args },
    { label: 'values-production.yaml with monitoring off', args: production },
  ])('$label renders no ServiceMonitor, PodMonitor, PrometheusRule or dashboard', ({ args }) => {
    const objects = renderChart(args);
    expect(objects.filter((o) => MONITORING_KINDS.includes(o.kind))).toEqual([]);
    expect(ofKind(objects, 'ConfigMap').filter((c) => c.data?.['custos.json'])).toEqual([]);
  });
});

describe('ServiceMonitor', () => {
  const args = [
    ...production,
    ...sets(
      'monitoring.serviceMonitor.enabled=true',
      'monitoring.serviceMonitor.namespace=monitoring',
      'monitoring.serviceMonitor.labels.release=kube-prometheus-stack',
      'monitoring.serviceMonitor.interval=15s',
      'monitoring.serviceMonitor.relabelings[0].targetLabel=cluster',
      'monitoring.serviceMonitor.relabelings[0].replacement=prod-eu',
    ),
  ];
  let objects: K8sObject[];
  beforeAll(() => {
    objects = renderChart(args);
  });

  it('renders one valid ServiceMonitor per service, in the namespace asked, with its labels', () => {
    const monitors = ofKind(objects, 'ServiceMonitor');
    expect(monitors.map((m) => m.metadata.name).sort()).toEqual(
      SERVICES.map((s) => `custos-custos-${s}`).sort(),
    );
    expect(validationErrors(monitors)).toEqual([]);
    for (const m of monitors) {
      expect(m.metadata.namespace).toBe('monitoring');
      expect(m.metadata.labels.release).toBe('kube-prometheus-stack');
      // From another namespace the monitor must name the release's.
      expect(m.spec.namespaceSelector).toEqual({ matchNames: [release.namespace] });
      expect(m.spec.endpoints).toEqual([
        {
          port: 'metrics',
          path: '/metrics',
          scheme: 'http',
          // The services' own service="<name>" label, which every alert matches, survives.
          honorLabels: true,
          interval: '15s',
          scrapeTimeout: '10s',
          relabelings: [{ targetLabel: 'cluster', replacement: 'prod-eu' }],
        },
      ]);
    }
    expect(ofKind(objects, 'PodMonitor')).toEqual([]);
  });

  it.each(SERVICES)('%s: selects exactly its Service that has the metrics port', (service) => {
    const monitor = named(objects, 'ServiceMonitor', `custos-custos-${service}`);
    const matched = ofKind(objects, 'Service').filter((s) =>
      selects(monitor.spec.selector, s.metadata.labels),
    );
    const withMetrics = matched.filter((s) => s.spec.ports.some((p: Json) => p.name === 'metrics'));
    expect(withMetrics.map((s) => s.metadata.name)).toEqual([objectName(service)]);
    const port = withMetrics[0]!.spec.ports.find((p: Json) => p.name === 'metrics');
    expect(port.port).toBe(METRICS_PORT);
  });

  it.each(SERVICES)('%s: its NetworkPolicy admits the scraper to the metrics port', (service) => {
    const policy = named(objects, 'NetworkPolicy', objectName(service));
    const rule = policy.spec.ingress.find((r: Json) => r.ports.some((p: Json) => p.port === METRICS_PORT));
    expect(rule.from).toEqual([
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
        podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
      },
    ]);
  });

  it('values-production.yaml: a ServiceMonitor per service, the rule and the dashboard, for kube-prometheus-stack', () => {
    const objects = renderChart(scenarios[1]!.args);
    expect(validationErrors(objects)).toEqual([]);
    const monitors = ofKind(objects, 'ServiceMonitor');
    expect(monitors).toHaveLength(SERVICES.length);
    for (const m of monitors) expect(m.metadata.labels.release).toBe('kube-prometheus-stack');
    const [rule] = ofKind(objects, 'PrometheusRule');
    expect(rule!.metadata.labels.release).toBe('kube-prometheus-stack');
    const cm = named(objects, 'ConfigMap', 'custos-custos-grafana-dashboard');
    expect(cm.metadata).toMatchObject({ namespace: 'monitoring', labels: { grafana_dashboard: '1' } });
  });

  it('in a shared namespace, two releases called custos in different namespaces do not collide', () => {
    const names = (namespace: string) =>
      runHelm([
        'template',
        'custos',
        chartDir,
        '--namespace',
        namespace,
        ...production,
        ...sets(
          'monitoring.serviceMonitor.enabled=true',
          'monitoring.serviceMonitor.namespace=monitoring',
          'monitoring.prometheusRule.enabled=true',
          'monitoring.prometheusRule.namespace=monitoring',
        ),
      ])
        .stdout.split('\n')
        .filter((l) => /^ {2}name: /.test(l));
    const a = new Set(names('team-a').filter((n) => n.includes('team-a')));
    const b = names('team-b').filter((n) => n.includes('team-b'));
    expect(a.size).toBe(SERVICES.length + 1);
    expect(b.filter((n) => a.has(n))).toEqual([]);
  });

  it('prometheus.io scrape annotations only without a ServiceMonitor or PodMonitor (no double scrape)', () => {
    const annotated = (args: string[]) =>
      ofKind(renderChart(args), 'Deployment').filter(
        (d) => d.spec.template.metadata.annotations?.['prometheus.io/scrape'] === 'true',
      ).length;
    expect(annotated(production)).toBe(SERVICES.length);
    expect(annotated(scenarios[1]!.args)).toBe(0);
    expect(annotated([...production, ...sets('monitoring.podMonitor.enabled=true')])).toBe(0);
  });

  it('in the release namespace needs no namespaceSelector', () => {
    const monitors = ofKind(
      renderChart([...production, ...sets('monitoring.serviceMonitor.enabled=true')]),
      'ServiceMonitor',
    );
    expect(monitors).toHaveLength(SERVICES.length);
    for (const m of monitors) {
      expect(m.metadata.namespace).toBeUndefined();
      expect(m.spec.namespaceSelector).toBeUndefined();
    }
  });
});

describe('PodMonitor', () => {
  it('renders one valid PodMonitor per service selecting exactly its pods, which expose the metrics port', () => {
    const objects = renderChart([...production, ...sets('monitoring.podMonitor.enabled=true')]);
    const monitors = ofKind(objects, 'PodMonitor');
    expect(monitors.map((m) => m.metadata.name).sort()).toEqual(SERVICES.map(objectName).sort());
    expect(validationErrors(monitors)).toEqual([]);
    for (const service of SERVICES) {
      const monitor = named(objects, 'PodMonitor', objectName(service));
      expect(monitor.spec.podMetricsEndpoints[0]).toMatchObject({
        port: 'metrics',
        path: '/metrics',
        honorLabels: true,
      });
      // job = the Custos service name (the target-down alert matches on it).
      expect(monitor.spec.jobLabel).toBe('app.kubernetes.io/component');
      const pods = [...ofKind(objects, 'Deployment'), ...ofKind(objects, 'Job')].filter((d) =>
        selects(monitor.spec.selector, d.spec.template.metadata.labels),
      );
      expect(pods.map((d) => d.metadata.name)).toEqual([objectName(service)]);
      const ports = pods[0]!.spec.template.spec.containers[0].ports;
      expect(ports).toContainEqual({ name: 'metrics', containerPort: METRICS_PORT, protocol: 'TCP' });
    }
  });

  it('is refused together with the ServiceMonitor (every pod scraped twice)', () => {
    const { status, stderr } = renderFailure([
      ...production,
      ...sets('monitoring.podMonitor.enabled=true', 'monitoring.serviceMonitor.enabled=true'),
    ]);
    expect(status).not.toBe(0);
    expect(stderr).toMatch(/serviceMonitor or podMonitor, not both/);
  });
});

describe('PrometheusRule and Grafana dashboard', () => {
  const rules = {
    groups: [
      {
        name: 'custos-test',
        rules: [
          {
            alert: 'CustosOutboxBacklog',
            expr: 'max by (service) (custos_outbox_pending_events) > 1000',
            for: '10m',
            labels: { severity: 'warning' },
            annotations: { summary: '{{ $labels.service }} has {{ $value }} unrelayed events' },
          },
        ],
      },
    ],
  };
  const dashboard = JSON.stringify({ title: 'Custos', panels: [{ title: 'p99 {{route}}' }] }, null, 2);
  let dir: string;
  beforeAll(() => {
    dir = chartCopyWithFiles(yaml.dump(rules), dashboard);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('the PrometheusRule carries the groups of files/prometheus-rules.yaml as they are, then additionalGroups', () => {
    const objects = renderDir(dir, [
      ...production,
      ...sets(
        'monitoring.prometheusRule.enabled=true',
        'monitoring.prometheusRule.labels.release=kube-prometheus-stack',
        'monitoring.prometheusRule.namespace=monitoring',
        'monitoring.prometheusRule.additionalGroups[0].name=site',
        'monitoring.prometheusRule.additionalGroups[0].rules[0].record=site:up',
        'monitoring.prometheusRule.additionalGroups[0].rules[0].expr=up',
      ),
    ]);
    const [rule, ...more] = ofKind(objects, 'PrometheusRule');
    expect(more).toEqual([]);
    expect(validationErrors([rule!])).toEqual([]);
    expect(rule!.metadata).toMatchObject({ name: 'custos-custos', namespace: 'monitoring' });
    expect(rule!.metadata.labels.release).toBe('kube-prometheus-stack');
    // Prometheus' own {{ $labels }} templates pass through untouched.
    expect(rule!.spec.groups).toEqual([
      ...rules.groups,
      { name: 'site', rules: [{ record: 'site:up', expr: 'up' }] },
    ]);
  });

  it('the dashboard ConfigMap holds files/grafana-dashboard.json byte for byte, with the sidecar label', () => {
    const objects = renderDir(dir, [
      ...production,
      ...sets('monitoring.grafanaDashboard.enabled=true', 'monitoring.grafanaDashboard.namespace=grafana'),
    ]);
    const cm = named(objects, 'ConfigMap', 'custos-custos-grafana-dashboard');
    expect(validationErrors([cm])).toEqual([]);
    expect(cm.metadata.namespace).toBe('grafana');
    expect(cm.metadata.labels.grafana_dashboard).toBe('1');
    expect(cm.data['custos.json']).toBe(dashboard);
  });

  it('the chart itself: renders its own rules file when it ships one, else refuses clearly', () => {
    const args = [...production, ...sets('monitoring.prometheusRule.enabled=true')];
    if (existsSync(RULES_FILE)) {
      const file = yaml.load(readFileSync(RULES_FILE, 'utf8')) as Json;
      const [rule] = ofKind(renderChart(args), 'PrometheusRule');
      expect(validationErrors([rule!])).toEqual([]);
      expect(rule!.spec.groups).toEqual(file.groups);
    } else {
      const { status, stderr } = renderFailure(args);
      expect(status).not.toBe(0);
      expect(stderr).toMatch(/no files\/prometheus-rules\.yaml/);
    }
  });

  it('the chart itself: renders its own dashboard when it ships one, else refuses clearly', () => {
    const args = [...production, ...sets('monitoring.grafanaDashboard.enabled=true')];
    if (existsSync(DASHBOARD_FILE)) {
      const cm = named(renderChart(args), 'ConfigMap', 'custos-custos-grafana-dashboard');
      expect(JSON.parse(cm.data['custos.json'])).toEqual(JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')));
    } else {
      const { status, stderr } = renderFailure(args);
      expect(status).not.toBe(0);
      expect(stderr).toMatch(/no files\/grafana-dashboard\.json/);
    }
  });
});
