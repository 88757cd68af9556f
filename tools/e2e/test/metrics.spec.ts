import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parser } from '@prometheus-io/lezer-promql';
import { waitFor } from '@custos/service-kit/testing';
import yaml from 'js-yaml';
import { api, quickUser } from '../src/api';
import { SERVICES, type Mesh, type ServiceName, sharedMesh } from '../src/mesh';
import { sharedRun } from '../src/shared-run';

// The alerts (charts/custos/files/prometheus-rules.yaml) and the dashboard
// (charts/custos/files/grafana-dashboard.json) against what the running services export: every
// metric an alert or a panel names must be in the /metrics of the service(s) that should export it.

const REPO = path.resolve(__dirname, '../../..');
const RULES_FILE = path.join(REPO, 'charts/custos/files/prometheus-rules.yaml');
const DASHBOARD_FILE = path.join(REPO, 'charts/custos/files/grafana-dashboard.json');
const MONITORING_DOC = path.join(REPO, 'docs/monitoring.md');
const RUNBOOK = 'https://github.com/custos-dev/custos/blob/main/docs/monitoring.md#';

/** Series Prometheus makes itself, never exported by a service. */
const PROMETHEUS_MADE = new Set(['up']);

const DATA_SERVICES = SERVICES.filter((s) => s !== 'gateway');
/** Who must export each custos_* family (docs/monitoring.md lists the same). */
const EXPECTED: Record<string, readonly ServiceName[]> = {
  // The gateway answers no RPCs of its own (its gRPC server is for health checks).
  custos_grpc_server_handled_total: DATA_SERVICES,
  custos_grpc_server_handling_seconds_bucket: DATA_SERVICES,
  custos_token_revocation_checks_total: SERVICES,
  custos_pg_pool_connections: DATA_SERVICES,
  custos_pg_pool_idle_connections: DATA_SERVICES,
  custos_pg_pool_waiting_requests: DATA_SERVICES,
  custos_pg_pool_max_connections: DATA_SERVICES,
  custos_outbox_pending_events: DATA_SERVICES,
  custos_outbox_oldest_pending_age_seconds: DATA_SERVICES,
  custos_outbox_publish_failures_total: DATA_SERVICES,
  custos_nats_consumer_pending_messages: ['audit', 'identity', 'webhook-dispatcher'],
  custos_nats_consumer_ack_pending_messages: ['audit', 'identity', 'webhook-dispatcher'],
  custos_nats_consumer_redelivered_messages: ['audit', 'identity', 'webhook-dispatcher'],
  custos_event_consumer_applied_total: ['audit', 'identity', 'webhook-dispatcher'],
  custos_event_consumer_failures_total: ['audit', 'identity', 'webhook-dispatcher'],
  custos_event_consumer_dropped_total: ['audit', 'identity', 'webhook-dispatcher'],
  custos_nats_consumer_info_failures_total: ['audit', 'identity', 'webhook-dispatcher'],
  custos_event_consumer_delay_seconds_bucket: ['audit', 'identity', 'webhook-dispatcher'],
  custos_kms_request_duration_seconds_bucket: ['vault-crypto'],
  custos_kms_request_failures_total: ['vault-crypto'],
  custos_http_requests_total: ['gateway'],
  custos_http_request_duration_seconds_bucket: ['gateway'],
  custos_audit_records_refused_total: ['audit'],
  custos_webhook_attempts_total: ['webhook-dispatcher'],
};

/** One sample of an exposition: its name and labels. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the Prometheus text exposition (prom-client's): the samples, comments left out. */
function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    const body = m[3] ?? '';
    const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
    for (let l = re.exec(body); l; l = re.exec(body)) labels[l[1]!] = l[2]!.replace(/\\(.)/g, '$1');
    samples.push({ name: m[1]!, labels, value: Number(m[4]) });
  }
  return samples;
}

/** A label matcher of a selector. */
interface Matcher {
  name: string;
  op: string;
  value: string;
}

/** A vector selector of an expression: its metric name and its `service` matcher, if any. */
interface Selector {
  metric: string;
  service?: { op: string; value: string };
}

/** A vector selector with all its label matchers. */
interface FullSelector extends Selector {
  matchers: Matcher[];
}

/**
 * The vector selectors of a PromQL expression, read with Prometheus' own grammar
 * (@prometheus-io/lezer-promql); throws when the expression does not parse.
 */
function fullSelectorsOf(expr: string): FullSelector[] {
  const tree = parser.parse(expr);
  const errors: number[] = [];
  const found: FullSelector[] = [];
  const text = (n: { from: number; to: number }) => expr.slice(n.from, n.to);
  tree.iterate({
    enter(n) {
      if (n.type.isError) errors.push(n.from);
      if (n.name !== 'VectorSelector') return;
      const node = n.node;
      let metric = node.getChild('Identifier') ? text(node.getChild('Identifier')!) : undefined;
      let service: Selector['service'];
      const matchers: Matcher[] = [];
      for (const m of node.getChild('LabelMatchers')?.getChildren('UnquotedLabelMatcher') ?? []) {
        const name = text(m.getChild('LabelName')!);
        const op = text(m.getChild('MatchOp')!);
        const value = JSON.parse(text(m.getChild('StringLiteral')!)) as string;
        if (name === '__name__' && op === '=') metric = value;
        else matchers.push({ name, op, value });
        if (name === 'service') service = { op, value };
      }
      if (!metric) throw new Error(`a selector without a metric name in: ${expr}`);
      found.push({ metric, ...(service ? { service } : {}), matchers });
    },
  });
  if (errors.length > 0) throw new Error(`invalid PromQL at offset ${errors[0]}: ${expr}`);
  return found;
}

/** The vector selectors of a PromQL expression: metric name and `service` matcher. */
function selectorsOf(expr: string): Selector[] {
  return fullSelectorsOf(expr).map(({ metric, service }) => ({ metric, ...(service ? { service } : {}) }));
}

/**
 * The services that must export the selector's metric: the one `service="x"` names, those a
 * `service=~"a|b"` regex matches; undefined when any one will do (no matcher, a negative one, `.+`).
 */
function exportersOf(s: Selector): readonly ServiceName[] | undefined {
  if (!s.service) return undefined;
  if (s.service.op === '=') return [s.service.value as ServiceName];
  if (s.service.op === '=~' && !/^\.[*+]$/.test(s.service.value)) {
    const re = new RegExp(`^(?:${s.service.value})$`);
    return SERVICES.filter((x) => re.test(x));
  }
  return undefined;
}

/** What is wrong with the metrics `exprs` name, given each service's samples: one line per miss. */
function missingMetrics(
  exprs: ReadonlyArray<{ where: string; expr: string }>,
  scrapes: ReadonlyMap<ServiceName, Sample[]>,
): string[] {
  const names = new Map<ServiceName, Set<string>>(
    [...scrapes].map(([s, samples]) => [s, new Set(samples.map((x) => x.name))]),
  );
  const problems: string[] = [];
  for (const { where, expr } of exprs) {
    for (const sel of selectorsOf(expr)) {
      if (PROMETHEUS_MADE.has(sel.metric)) continue;
      const must = exportersOf(sel);
      if (must) {
        for (const s of must) {
          if (!names.get(s)?.has(sel.metric))
            problems.push(`${where}: ${sel.metric} is not exported by ${s}`);
        }
      } else if (![...names.values()].some((n) => n.has(sel.metric))) {
        problems.push(`${where}: ${sel.metric} is exported by no service`);
      }
    }
  }
  return problems;
}

/**
 * Label values the rules and the dashboard match on that appear only once something has happened
 * (so a fresh mesh cannot show them), each with why that is acceptable. Everything else a matcher
 * compares with must be among the scraped values of its metric: a value that is exported only after
 * an event would leave its alert without data until then, and a misspelt one would never match.
 */
const KNOWN_DYNAMIC: Record<string, string> = {
  'custos_grpc_server_handled_total{grpc_code="2"}':
    'gRPC codes appear with the first call that ends in them; the regex matches whichever server-side codes occur',
  'custos_grpc_server_handled_total{grpc_code="4"}': 'as grpc_code="2"',
  'custos_grpc_server_handled_total{grpc_code="12"}': 'as grpc_code="2"',
  'custos_grpc_server_handled_total{grpc_code="13"}': 'as grpc_code="2"',
  'custos_grpc_server_handled_total{grpc_code="14"}': 'as grpc_code="2"',
  'custos_grpc_server_handled_total{grpc_code="15"}': 'as grpc_code="2"',
};

/** Label names whose values the checker leaves alone: the service (checked by exportersOf) and target labels. */
const NOT_CHECKED = new Set(['service', 'job', 'namespace', 'instance', 'le']);

/**
 * The values of `label="v"`, `label!="v"` and of plain alternations `label=~"a|b"` that are not among
 * the values `label` has in the scraped samples of the selector's metric (from the services the
 * selector names, else all), and not in `knownDynamic`: one line per value.
 */
function unknownLabelValues(
  exprs: ReadonlyArray<{ where: string; expr: string }>,
  scrapes: ReadonlyMap<ServiceName, Sample[]>,
  knownDynamic: Readonly<Record<string, string>> = KNOWN_DYNAMIC,
): string[] {
  const problems: string[] = [];
  for (const { where, expr } of exprs) {
    for (const sel of fullSelectorsOf(expr)) {
      if (PROMETHEUS_MADE.has(sel.metric)) continue;
      const from = exportersOf(sel) ?? [...scrapes.keys()];
      for (const m of sel.matchers) {
        if (NOT_CHECKED.has(m.name) || m.value === '') continue;
        let values: string[];
        if (m.op === '=' || m.op === '!=') values = [m.value];
        else if (/^[A-Za-z0-9_:/-]+(\|[A-Za-z0-9_:/-]+)*$/.test(m.value)) values = m.value.split('|');
        else continue;
        const seen = new Set(
          from.flatMap((s) =>
            (scrapes.get(s) ?? []).filter((x) => x.name === sel.metric).map((x) => x.labels[m.name]),
          ),
        );
        for (const v of values) {
          const key = `${sel.metric}{${m.name}="${v}"}`;
          if (!seen.has(v) && !(key in knownDynamic))
            problems.push(`${where}: ${key} is not among the exported values of ${m.name}`);
        }
      }
    }
  }
  return problems;
}

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

function loadRules(): Rule[] {
  const doc = yaml.load(fs.readFileSync(RULES_FILE, 'utf8')) as {
    groups: Array<{ name: string; rules: Rule[] }>;
  };
  return doc.groups.flatMap((g) => g.rules);
}

interface Panel {
  title?: string;
  type: string;
  panels?: Panel[];
  targets?: Array<{ expr?: string }>;
}

/** Every panel target's expression, with the dashboard's variables put in as Grafana would. */
function dashboardExprs(): Array<{ where: string; expr: string }> {
  const dash = JSON.parse(fs.readFileSync(DASHBOARD_FILE, 'utf8')) as { panels: Panel[] };
  const all = (ps: Panel[]): Panel[] => ps.flatMap((p) => [p, ...all(p.panels ?? [])]);
  return all(dash.panels).flatMap((p) =>
    (p.targets ?? []).map((t) => ({
      where: `panel "${p.title}"`,
      // `$service` and `$namespace` are their "All" values (.+, .*), `$__rate_interval` a range.
      expr: (t.expr ?? '')
        .replace(/\$__rate_interval/g, '5m')
        .replace(/\$\{?service\}?/g, '.+')
        .replace(/\$\{?namespace\}?/g, '.*'),
    })),
  );
}

/** The dashboard's query variables: name and the selector of their `label_values(<selector>, <label>)`. */
function dashboardVariables(): Array<{ name: string; selector: string; label: string }> {
  const dash = JSON.parse(fs.readFileSync(DASHBOARD_FILE, 'utf8')) as {
    templating: { list: Array<{ name: string; type: string; query?: { query?: string } | string }> };
  };
  return dash.templating.list
    .filter((v) => v.type === 'query')
    .map((v) => {
      const q = typeof v.query === 'string' ? v.query : (v.query?.query ?? '');
      const m = /^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$/.exec(q);
      if (!m) throw new Error(`variable ${v.name}: not a label_values query: ${q}`);
      return { name: v.name, selector: m[1]!.replace(/\$\{?namespace\}?/g, '.*'), label: m[2]! };
    });
}

/** Each service's metrics port, from its `ready` log line in the shared mesh's logs. */
function metricsPorts(): Map<ServiceName, number> {
  const info = sharedRun().meshes.default!;
  const ports = new Map<ServiceName, number>();
  for (const s of SERVICES) {
    const lines = fs.readFileSync(path.join(info.logDir, `${s}.log`), 'utf8').split('\n');
    for (const line of lines) {
      if (!line.startsWith('{')) continue;
      const entry = JSON.parse(line) as { msg?: string; metrics_port?: number };
      // The last one: a service the supervisor restarted announces its port again.
      if (entry.msg === 'ready' && entry.metrics_port) ports.set(s, entry.metrics_port);
    }
    if (!ports.has(s)) throw new Error(`no ready line with metrics_port in ${s}.log`);
  }
  return ports;
}

async function scrapeAll(ports: Map<ServiceName, number>): Promise<Map<ServiceName, Sample[]>> {
  const out = new Map<ServiceName, Sample[]>();
  for (const [s, port] of ports) {
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    out.set(s, parseExposition(text));
  }
  return out;
}

describe('PromQL metric names (the checker itself)', () => {
  const scrapes = new Map<ServiceName, Sample[]>([
    ['gateway', [{ name: 'custos_http_requests_total', labels: { service: 'gateway' }, value: 1 }]],
    ['audit', [{ name: 'custos_event_consumer_applied_total', labels: { service: 'audit' }, value: 1 }]],
  ]);

  it('reads names out of selectors, ranges, functions and __name__ matchers, with their service', () => {
    expect(
      selectorsOf(
        'sum by (service) (rate(a_total{service="gateway", x=~"1|2"}[5m])) / on(service) b unless {__name__="c", service=~"audit|billing"}',
      ),
    ).toEqual([
      { metric: 'a_total', service: { op: '=', value: 'gateway' } },
      { metric: 'b' },
      { metric: 'c', service: { op: '=~', value: 'audit|billing' } },
    ]);
    expect(() => selectorsOf('sum(rate(a_total[5m])')).toThrow(/invalid PromQL/);
  });

  it('reports a metric nobody exports, and one the named service does not export', () => {
    expect(
      missingMetrics(
        [
          { where: 'ok', expr: 'rate(custos_http_requests_total{service="gateway"}[5m])' },
          { where: 'typo', expr: 'rate(custos_http_request_total[5m]) > 0' },
          { where: 'wrong service', expr: 'custos_event_consumer_applied_total{service=~"audit|identity"}' },
          { where: 'prometheus', expr: 'up{job="audit"} == 0' },
        ],
        scrapes,
      ),
    ).toEqual([
      'typo: custos_http_request_total is exported by no service',
      'wrong service: custos_event_consumer_applied_total is not exported by identity',
    ]);
  });
});

describe('label values the expressions match on (the checker itself)', () => {
  const scrapes = new Map<ServiceName, Sample[]>([
    [
      'gateway',
      [
        {
          name: 'custos_token_revocation_checks_total',
          labels: { service: 'gateway', outcome: 'passed' },
          value: 1,
        },
        { name: 'custos_pg_pool_waiting_requests', labels: { service: 'gateway', pool: 'main' }, value: 0 },
      ],
    ],
    [
      'audit',
      [
        {
          name: 'custos_token_revocation_checks_total',
          labels: { service: 'audit', outcome: 'failed' },
          value: 0,
        },
      ],
    ],
  ]);

  it('reports a misspelt value, a value only another service exports, and each unknown alternative', () => {
    const exprs = [
      { where: 'ok', expr: 'custos_token_revocation_checks_total{service="gateway", outcome="passed"}' },
      { where: 'ok anywhere', expr: 'custos_token_revocation_checks_total{outcome="failed"}' },
      { where: 'typo', expr: 'custos_token_revocation_checks_total{outcome="failure"}' },
      {
        where: 'elsewhere',
        expr: 'custos_token_revocation_checks_total{service="gateway", outcome="failed"}',
      },
      { where: 'negated', expr: 'custos_pg_pool_waiting_requests{pool!="mian"}' },
      { where: 'alternation', expr: 'custos_pg_pool_waiting_requests{pool=~"main|health"}' },
      { where: 'regex', expr: 'custos_pg_pool_waiting_requests{pool=~"ma.+"}' },
    ];
    expect(unknownLabelValues(exprs, scrapes, {})).toEqual([
      'typo: custos_token_revocation_checks_total{outcome="failure"} is not among the exported values of outcome',
      'elsewhere: custos_token_revocation_checks_total{outcome="failed"} is not among the exported values of outcome',
      'negated: custos_pg_pool_waiting_requests{pool="mian"} is not among the exported values of pool',
      'alternation: custos_pg_pool_waiting_requests{pool="health"} is not among the exported values of pool',
    ]);
    // A value listed as known-dynamic (with its reason) is accepted.
    expect(
      unknownLabelValues([exprs[2]!], scrapes, {
        'custos_token_revocation_checks_total{outcome="failure"}': 'test',
      }),
    ).toEqual([]);
  });
});

describe('the alert rules file', () => {
  const rules = loadRules();
  const doc = fs.readFileSync(MONITORING_DOC, 'utf8');

  it('has alerts with a duration, a severity, a summary, a description and a runbook in docs/monitoring.md', () => {
    expect(rules.length).toBeGreaterThanOrEqual(15);
    const anchors = new Set(
      [...doc.matchAll(/^#{2,4} (.+)$/gm)].map((m) =>
        m[1]!
          .trim()
          .toLowerCase()
          .replace(/[^a-z0-9 -]/g, '')
          .replace(/ /g, '-'),
      ),
    );
    for (const r of rules) {
      expect(r.alert).toMatch(/^Custos[A-Z][A-Za-z0-9]+$/);
      expect(r.for).toMatch(/^\d+[smh]$/);
      expect(['critical', 'warning']).toContain(r.labels?.['severity']);
      expect(r.annotations?.['summary']).toBeTruthy();
      expect(r.annotations?.['description']).toBeTruthy();
      const url = r.annotations?.['runbook_url'] ?? '';
      expect(url.startsWith(RUNBOOK)).toBe(true);
      const anchor = url.slice(RUNBOOK.length);
      expect({ alert: r.alert, anchor, inDoc: anchors.has(anchor) }).toEqual({
        alert: r.alert,
        anchor: r.alert!.toLowerCase(),
        inDoc: true,
      });
    }
    expect(new Set(rules.map((r) => r.alert)).size).toBe(rules.length);
  });

  it('has only expressions that parse as PromQL, and its target-down alert names every service', () => {
    for (const r of rules) expect(() => selectorsOf(r.expr)).not.toThrow();
    const down = rules.find((r) => r.alert === 'CustosTargetDown')!;
    const job = /job=~"([^"]+)"/.exec(down.expr)![1]!;
    expect(job.split('|').sort()).toEqual([...SERVICES].sort());
  });

  it('covers what the issue asks to be alerted on', () => {
    const used = new Set(rules.flatMap((r) => selectorsOf(r.expr).map((s) => s.metric)));
    for (const m of [
      'up',
      'custos_http_requests_total',
      'custos_http_request_duration_seconds_bucket',
      'custos_grpc_server_handled_total',
      'custos_outbox_oldest_pending_age_seconds',
      'custos_nats_consumer_pending_messages',
      'custos_event_consumer_delay_seconds_bucket',
      'custos_kms_request_failures_total',
      'custos_kms_request_duration_seconds_bucket',
      'custos_pg_pool_waiting_requests',
      'custos_pg_pool_max_connections',
      'custos_token_revocation_checks_total',
    ])
      expect({ metric: m, used: used.has(m) }).toEqual({ metric: m, used: true });
  });
});

// Prometheus' own checker and evaluator (tools/dev/ensure-infra.sh installs Debian's `prometheus`
// package for it, so a missing promtool fails here rather than skipping): the rules load, and the
// alerts fire with these labels and annotations on synthetic series.
describe('the alert rules under promtool', () => {
  it('has promtool to run them with', () => {
    expect(spawnSync('promtool', ['--version']).status).toBe(0);
  });

  const run = (...args: string[]) => {
    const r = spawnSync('promtool', args, { encoding: 'utf8' });
    return { status: r.status, out: `${r.stdout}${r.stderr}` };
  };

  it('loads every rule (promtool check rules)', () => {
    expect(run('check', 'rules', RULES_FILE)).toMatchObject({ status: 0 });
  });

  it('fires the alerts its unit tests expect (promtool test rules)', () => {
    const tests = path.join(__dirname, '../fixtures/prometheus-rules.promtool-test.yaml');
    const r = run('test', 'rules', tests);
    expect(r.out).toContain('SUCCESS');
    expect(r.status).toBe(0);
  });
});

describe('the metrics the running services export', () => {
  let mesh: Mesh;
  let scrapes: Map<ServiceName, Sample[]>;
  let vaultId: string;
  const canary = `canary-${randomBytes(12).toString('hex')}`;

  beforeAll(async () => {
    mesh = await sharedMesh();
    // Traffic through every kind of work: a request per route kind, a KMS wrap and unwrap, an
    // audit record chained, and a secret value that must never reach a label.
    const owner = await quickUser(mesh);
    const v = await api(mesh, 'POST', '/v1/vaults', { token: owner.token, body: { name: 'metrics' } });
    expect(v.status).toBe(201);
    vaultId = v.body['id'] as string;
    const put = await api(mesh, 'PUT', `/v1/vaults/${vaultId}/secrets/app/${canary}`, {
      token: owner.token,
      body: { type: 'password', value: canary },
    });
    expect(put.status).toBe(201);
    const got = await api(mesh, 'GET', `/v1/vaults/${vaultId}/secrets/app/${canary}`, { token: owner.token });
    expect(got.status).toBe(200);
    expect(
      await api(mesh, 'GET', `/v1/vaults/${vaultId}/secrets/app/missing`, { token: owner.token }),
    ).toMatchObject({
      status: 404,
    });
    // A path no route declares: the gateway's route="unmatched" series the alerts exclude.
    expect(await api(mesh, 'GET', '/v1/no-such-route', { token: owner.token })).toMatchObject({
      status: 404,
    });
    // The records are chained once audit has applied them; then its delay histogram has them.
    await waitFor(async () => {
      const r = await api(mesh, 'GET', '/v1/audit/events?limit=50', { token: owner.token });
      const events = (r.body['events'] ?? []) as Array<{ action: string }>;
      return events.some((e) => e.action === 'secret.read');
    }, 30000);
    const ports = metricsPorts();
    // Consumers' lag is read 1 s after start and every 15 s: wait until every consumer has a reading.
    scrapes = await waitFor(async () => {
      const s = await scrapeAll(ports);
      const names = (svc: ServiceName) => new Set(s.get(svc)!.map((x) => x.name));
      const ready = ['audit', 'identity', 'webhook-dispatcher'].every((svc) =>
        names(svc as ServiceName).has('custos_nats_consumer_pending_messages'),
      );
      return ready ? s : undefined;
    }, 30000);
  });

  it('exports every metric an alert expression names, from the services the alert expects', () => {
    const exprs = loadRules().map((r) => ({ where: `alert ${r.alert}`, expr: r.expr }));
    expect(missingMetrics(exprs, scrapes)).toEqual([]);
  });

  it('exports every metric a dashboard panel names', () => {
    const exprs = dashboardExprs();
    expect(exprs.length).toBeGreaterThanOrEqual(25);
    expect(missingMetrics(exprs, scrapes)).toEqual([]);
  });

  it('exports every label value an alert or a panel matches on, or lists it as known-dynamic with a reason', () => {
    const exprs = [
      ...loadRules().map((r) => ({ where: `alert ${r.alert}`, expr: r.expr })),
      ...dashboardExprs(),
    ];
    expect(unknownLabelValues(exprs, scrapes)).toEqual([]);
    // No stale entries: every known-dynamic value is one an expression matches on.
    const matched = new Set(
      exprs.flatMap(({ expr }) =>
        fullSelectorsOf(expr).flatMap((s) =>
          s.matchers.flatMap((m) => m.value.split('|').map((v) => `${s.metric}{${m.name}="${v}"}`)),
        ),
      ),
    );
    for (const key of Object.keys(KNOWN_DYNAMIC))
      expect({ key, matched: matched.has(key) }).toEqual({ key, matched: true });
  });

  it('fills the dashboard variables from a metric every service exports, with that label', () => {
    const vars = dashboardVariables();
    const service = vars.find((v) => v.name === 'service')!;
    const sel = fullSelectorsOf(service.selector)[0]!;
    for (const s of SERVICES) {
      const samples = scrapes.get(s)!.filter((x) => x.name === sel.metric);
      expect({
        service: s,
        metric: sel.metric,
        labelled: samples.some((x) => x.labels[service.label] === s),
      }).toEqual({
        service: s,
        metric: sel.metric,
        labelled: true,
      });
    }
    expect(vars.map((v) => v.name).sort()).toEqual(['namespace', 'service']);
  });

  it('exports each custos_* family from every service that does that work, labelled with the service', () => {
    for (const [metric, services] of Object.entries(EXPECTED)) {
      for (const s of services) {
        const samples = scrapes.get(s)!.filter((x) => x.name === metric);
        expect({ metric, service: s, exported: samples.length > 0 }).toEqual({
          metric,
          service: s,
          exported: true,
        });
        expect(samples.every((x) => x.labels['service'] === s)).toBe(true);
      }
    }
  });

  it('counts the work that was done: KMS calls, revocation checks, chained audit records', () => {
    // Summed over the series of the name that have these labels.
    const value = (s: ServiceName, name: string, labels: Record<string, string>) =>
      scrapes
        .get(s)!
        .filter((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v))
        .reduce((sum, x) => sum + x.value, 0);
    const wraps = { provider: 'local', operation: 'wrap' };
    expect(value('vault-crypto', 'custos_kms_request_duration_seconds_count', wraps)).toBeGreaterThan(0);
    expect(value('gateway', 'custos_token_revocation_checks_total', { outcome: 'passed' })).toBeGreaterThan(
      0,
    );
    expect(
      value('vault-crypto', 'custos_token_revocation_checks_total', { outcome: 'passed' }),
    ).toBeGreaterThan(0);
    expect(
      value('audit', 'custos_event_consumer_applied_total', { consumer: 'audit-chain' }),
    ).toBeGreaterThan(0);
    expect(
      value('audit', 'custos_event_consumer_delay_seconds_count', { consumer: 'audit-chain' }),
    ).toBeGreaterThan(0);
    expect(value('vault-crypto', 'custos_pg_pool_max_connections', { pool: 'main' })).toBeGreaterThan(0);
  });

  it('labels gateway requests by route template, and no label anywhere holds an id or a secret', () => {
    const routes = new Set(
      scrapes
        .get('gateway')!
        .filter((x) => x.name === 'custos_http_requests_total')
        .map((x) => x.labels['route']),
    );
    expect(routes).toContain('/v1/vaults/:vault_id/secrets/*path');
    const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;
    for (const [service, samples] of scrapes) {
      for (const { name, labels } of samples) {
        for (const [label, value] of Object.entries(labels)) {
          const bad = uuid.test(value) || value.includes(canary) || value.includes(vaultId);
          if (bad) throw new Error(`${service} ${name}{${label}="${value}"} holds an id or a secret`);
        }
      }
    }
  });
});
