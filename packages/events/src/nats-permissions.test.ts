import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { INTERNAL_EVENTS, SUBSCRIBABLE_EVENTS } from './catalogue';
import {
  FANOUT_CONSUMERS,
  NATS_SERVICES,
  NATS_SERVICE_NAMES,
  chartNatsPermissions,
  chartNatsPermissionsJson,
  natsPermissions,
  natsServerConfig,
} from './nats-permissions';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const CHART_FILE = path.join(ROOT, 'charts', 'custos', 'files', 'nats-permissions.json');

/** Every .ts file under a service's src (tests excluded). */
function sourcesOf(service: string): string {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts')) out.push(fs.readFileSync(p, 'utf8'));
    }
  };
  walk(path.join(ROOT, 'services', service, 'src'));
  return out.join('\n');
}

describe('natsPermissions', () => {
  it('lets a service publish its own events and audit records, and nothing of another service', () => {
    const p = natsPermissions('policy', { prefix: 'custos.events', stream: 'CUSTOS_EVENTS' });
    expect(p.publish).toEqual(
      expect.arrayContaining([
        'custos.events.policy.created',
        'custos.events.audit.recorded.policy',
        '$JS.API.STREAM.CREATE.CUSTOS_EVENTS',
      ]),
    );
    expect(p.publish.some((s) => s.includes('vault-crypto') || s.includes('share.email_requested'))).toBe(
      false,
    );
    expect(p.publish.some((s) => /STREAM\.(DELETE|PURGE|UPDATE)|MSG\.GET|DIRECT/.test(s))).toBe(false);
    expect(p.subscribe).toEqual(['_INBOX_policy.>']);
  });

  it('pins each consumer to its own durable and filter', () => {
    const p = natsPermissions('audit', { prefix: 'p', stream: 'S' });
    expect(p.publish).toEqual(
      expect.arrayContaining([
        '$JS.API.CONSUMER.CREATE.S.audit-chain.p.audit.recorded.>',
        '$JS.API.CONSUMER.MSG.NEXT.S.audit-chain',
        '$JS.ACK.S.audit-chain.>',
      ]),
    );
    // audit makes its own records directly: it publishes no event at all.
    expect(p.publish.filter((s) => s.startsWith('p.'))).toEqual([]);
  });

  it('renders a nats-server config with one user per entry', () => {
    const conf = natsServerConfig({
      host: '127.0.0.1',
      port: 4999,
      storeDir: '/tmp/x',
      users: [
        { user: 'policy', password: 'p"w', permissions: { publish: ['a.b'], subscribe: ['c.>'] } },
        { user: 'custos_test', password: 'pw' },
      ],
    });
    expect(conf).toContain('listen: "127.0.0.1:4999"');
    expect(conf).toContain('{ user: "policy", password: "p\\"w", permissions: { publish: { allow: ["a.b"] }');
    expect(conf).toContain('{ user: "custos_test", password: "pw" }');
  });
});

describe('the permissions table against the code', () => {
  it.each(NATS_SERVICE_NAMES)('%s: publishes exactly the events its code writes', (service) => {
    const src = sourcesOf(service);
    const written = new Set<string>();
    for (const m of src.matchAll(/writeEvent\([^]*?name:\s*'([a-z_.]+)'/g)) written.add(m[1]!);
    const use = NATS_SERVICES[service];
    expect([...written].sort()).toEqual([...use.publishes].sort());
    // audit's records go straight into its chain; every other producer writes through writeAudit.
    if (/writeAudit\(/.test(src)) expect(use.audits).toBe(true);
  });

  it.each(NATS_SERVICE_NAMES)('%s: has a permission for each of its durable consumers', (service) => {
    const src = sourcesOf(service);
    const use = NATS_SERVICES[service];
    if (service === 'webhook-dispatcher') {
      // One consumer per entry of FANOUT_CONSUMERS, the table's own list.
      expect(src).toMatch(/FANOUT_CONSUMERS\.map\([^]*?new IdempotentConsumer\([^]*?durable: c\.durable/);
      expect(use.consumers).toBe(FANOUT_CONSUMERS);
      return;
    }
    const consumers = (src.match(/new IdempotentConsumer\(/g) ?? []).length;
    expect(use.consumers).toHaveLength(consumers);
    for (const c of use.consumers) expect(src).toContain(`'${c.durable}'`);
  });
});

describe('the fan-out consumers of webhook-dispatcher', () => {
  it('read every subscribable event and no internal one', () => {
    const reads = (name: string) =>
      FANOUT_CONSUMERS.some((c) => `${name}.`.startsWith(c.filter.slice(0, -1)));
    for (const e of SUBSCRIBABLE_EVENTS) expect(reads(e)).toBe(true);
    for (const e of INTERNAL_EVENTS) expect(reads(e)).toBe(false);
    const p = natsPermissions('webhook-dispatcher', { prefix: 'p', stream: 'S' });
    expect(p.publish).toContain('$JS.API.CONSUMER.CREATE.S.webhook-fanout-policy.p.policy.>');
    expect(p.publish.some((s) => s.includes('audit.recorded.>') || s.includes('share.'))).toBe(false);
    // The old single consumer: its position may be read (to start after it), nothing else.
    expect(p.publish.filter((s) => /\.webhook-fanout(\.|$)/.test(s))).toEqual([
      '$JS.API.CONSUMER.INFO.S.webhook-fanout',
    ]);
  });
});

describe('charts/custos/files/nats-permissions.json', () => {
  it('holds what natsPermissions renders (UPDATE_NATS_PERMISSIONS=1 rewrites it)', () => {
    if (process.env.UPDATE_NATS_PERMISSIONS === '1') {
      fs.mkdirSync(path.dirname(CHART_FILE), { recursive: true });
      fs.writeFileSync(CHART_FILE, chartNatsPermissionsJson());
      // Formatted by the repository's prettier, so `pnpm lint` accepts it as it is.
      execFileSync('pnpm', ['exec', 'prettier', '--write', CHART_FILE], { cwd: ROOT, stdio: 'ignore' });
    }
    const have: unknown = fs.existsSync(CHART_FILE) ? JSON.parse(fs.readFileSync(CHART_FILE, 'utf8')) : null;
    expect(have).toEqual(chartNatsPermissions());
  });
});
