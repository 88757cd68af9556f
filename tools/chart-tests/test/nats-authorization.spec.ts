// The ConfigMap <prefix>-nats-authorization: an `authorization { users = [...] }` block for the
// operator's NATS server, one user per service that uses NATS, with the permissions of
// charts/custos/files/nats-permissions.json (written by packages/events) and each password only
// as `$NATS_PASSWORD_<SERVICE>`. Checked on the text, then on a real nats-server: the rendered block
// loads, each user signs in with its own password only, and may publish what it owns, not more.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { NATS_SERVICES, NATS_USERS } from './facts';
import {
  type Json,
  type K8sObject,
  REQUIRED_SETS,
  chartDir,
  named,
  ofKind,
  release,
  renderChart,
  renderFailure,
  scenarios,
  sets,
  testNatsPassword,
} from './helm';

const CONFIG_KEY = 'custos-authorization.conf';
const envName = (service: string) => `NATS_PASSWORD_${service.toUpperCase().replace(/-/g, '_')}`;

/** files/nats-permissions.json with its placeholders filled in. */
function expectedPermissions(prefix: string, stream: string): Record<string, Json> {
  const raw = readFileSync(path.join(chartDir, 'files', 'nats-permissions.json'), 'utf8');
  return JSON.parse(raw.replaceAll('{prefix}', prefix).replaceAll('{stream}', stream));
}

/** The users of the rendered block: user, password token and permissions, in order. */
function usersOf(conf: string): Array<{ user: string; password: string; permissions: Json }> {
  const users: Array<{ user: string; password: string; permissions: Json }> = [];
  const re = /user: "([^"]+)"\n\s+password: (\S+)\n\s+permissions: (.+)\n/g;
  for (const m of conf.matchAll(re))
    users.push({ user: m[1]!, password: m[2]!, permissions: JSON.parse(m[3]!) });
  return users;
}

function configOf(objects: K8sObject[]): string {
  return named(objects, 'ConfigMap', `${release.name}-nats-authorization`).data[CONFIG_KEY];
}

describe.each(scenarios)('NATS authorization rendered with $label', ({ args }) => {
  let conf: string;
  beforeAll(() => {
    conf = configOf(renderChart(args));
  });

  it('has one user per service that uses NATS, with its permissions from nats-permissions.json', () => {
    const expected = expectedPermissions('custos.events', 'CUSTOS_EVENTS');
    const users = usersOf(conf);
    expect(users.map((u) => u.user).sort()).toEqual(NATS_SERVICES.map((s) => NATS_USERS[s]).sort());
    for (const service of NATS_SERVICES) {
      const user = users.find((u) => u.user === NATS_USERS[service])!;
      expect({ service, password: user.password }).toEqual({ service, password: `$${envName(service)}` });
      expect({ service, permissions: user.permissions }).toEqual({ service, permissions: expected[service] });
    }
    expect(conf).not.toMatch(/\{prefix\}|\{stream\}/);
    expect(conf).toMatch(/^authorization \{$/m);
  });

  it('holds no password, and names the Secret each server variable comes from', () => {
    for (const service of NATS_SERVICES) {
      expect(conf).not.toContain(testNatsPassword(service));
      expect(conf).toMatch(
        new RegExp(`#\\s+${envName(service)}\\s+Secret custos-${service}-credentials, key nats-password`),
      );
    }
  });
});

describe('NATS authorization values', () => {
  it('fills in the subject prefix and stream of the values', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      ...sets('nats.subjectPrefix=acme.custos', 'nats.stream=ACME'),
    ]);
    const expected = expectedPermissions('acme.custos', 'ACME');
    const audit = usersOf(configOf(objects)).find((u) => u.user === NATS_USERS.audit)!;
    expect(audit.permissions).toEqual(expected.audit);
    expect(JSON.stringify(audit.permissions)).toContain('ACME');
  });

  it('serverAuthorization.enabled=false renders no ConfigMap', () => {
    const objects = renderChart([...REQUIRED_SETS, ...sets('nats.serverAuthorization.enabled=false')]);
    expect(ofKind(objects, 'ConfigMap').map((c) => c.metadata.name)).not.toContain(
      `${release.name}-nats-authorization`,
    );
  });

  it('the schema refuses a prefix or stream that would change the permissions’ meaning', () => {
    for (const set of ['nats.subjectPrefix=custos.>', 'nats.stream=A.B', 'nats.subjectPrefix=a"b']) {
      const r = renderFailure([...REQUIRED_SETS, ...sets(set)]);
      expect({ set, status: r.status === 0 }).toEqual({ set, status: false });
    }
  });
});

// --- a real nats-server ------------------------------------------------------------------------

function natsServerBin(): string {
  if (process.env.NATS_SERVER_BIN) return process.env.NATS_SERVER_BIN;
  for (const candidate of ['/usr/sbin/nats-server', '/usr/bin/nats-server', '/usr/local/bin/nats-server'])
    if (existsSync(candidate)) return candidate;
  throw new Error('nats-server not found: install it (tools/dev/ensure-infra.sh) or set NATS_SERVER_BIN');
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * One NATS client session over the text protocol: CONNECT (verbose, so every operation is
 * answered +OK or -ERR) as `user`, the given operations, then PING. Returns the server's answers
 * after INFO, up to PONG or the connection's end.
 */
async function session(port: number, user: string, pass: string, ops: string[]): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const lines: string[] = [];
    let buffer = '';
    let sent = false;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`NATS session timed out: ${lines.join(' | ')}`));
    }, 5000);
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(lines);
    };
    socket.on('data', (chunk) => {
      buffer += chunk.toString('utf8');
      let i: number;
      while ((i = buffer.indexOf('\r\n')) >= 0) {
        const line = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        if (line.startsWith('INFO ')) {
          if (!sent) {
            sent = true;
            const connect = {
              verbose: true,
              pedantic: false,
              user,
              pass,
              name: 'chart-tests',
              lang: 'node',
              version: '0',
            };
            socket.write(`CONNECT ${JSON.stringify(connect)}\r\n${ops.join('')}PING\r\n`);
          }
          continue;
        }
        lines.push(line);
        if (line === 'PONG') return done();
      }
    });
    socket.on('close', done);
    socket.on('error', () => undefined);
  });
}

const pub = (subject: string) => `PUB ${subject} 2\r\nhi\r\n`;
const sub = (subject: string, sid: number) => `SUB ${subject} ${sid}\r\n`;

describe('the rendered authorization block on a real nats-server', () => {
  let dir: string;
  let server: ChildProcess;
  let port: number;
  let log = '';
  const permissions = expectedPermissions('custos.events', 'CUSTOS_EVENTS');

  beforeAll(async () => {
    const bin = natsServerBin();
    dir = mkdtempSync(path.join(os.tmpdir(), 'custos-chart-nats-'));
    writeFileSync(path.join(dir, CONFIG_KEY), configOf(renderChart(REQUIRED_SETS)));
    port = await freePort();
    // As the docs say: the operator's configuration includes the file.
    writeFileSync(path.join(dir, 'nats.conf'), `listen: 127.0.0.1:${port}\ninclude ./${CONFIG_KEY}\n`);
    const env = {
      ...process.env,
      ...Object.fromEntries(NATS_SERVICES.map((s) => [envName(s), testNatsPassword(s)])),
    };
    // The configuration must load (passwords from the environment) before the server starts.
    execFileSync(bin, ['-c', path.join(dir, 'nats.conf'), '-t'], { env, stdio: 'pipe' });
    server = spawn(bin, ['-c', path.join(dir, 'nats.conf')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    server.stderr!.on('data', (d) => (log += d.toString()));
    server.stdout!.on('data', (d) => (log += d.toString()));
    for (let i = 0; i < 100; i++) {
      const up = await new Promise<boolean>((resolve) => {
        const s = net.connect(port, '127.0.0.1', () => {
          s.destroy();
          resolve(true);
        });
        s.on('error', () => resolve(false));
      });
      if (up) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`nats-server did not start:\n${log}`);
  });

  afterAll(() => {
    server?.kill('SIGTERM');
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it.each(NATS_SERVICES)(
    '%s signs in with its own password and may publish what it owns',
    async (service) => {
      const allowed = (permissions[service].publish as string[]).filter(
        (s) => !s.includes('*') && !s.includes('>'),
      );
      expect(allowed.length).toBeGreaterThan(0);
      const answers = await session(port, NATS_USERS[service]!, testNatsPassword(service), allowed.map(pub));
      expect(answers).toEqual([...Array(1 + allowed.length).fill('+OK'), 'PONG']);
    },
  );

  it('a wrong password, or another service’s, is refused', async () => {
    for (const pass of ['not-the-password', testNatsPassword('vault-crypto')]) {
      const answers = await session(port, NATS_USERS['webhook-dispatcher']!, pass, []);
      expect(answers[0]).toMatch(/^-ERR 'Authorization Violation'/);
      expect(answers).not.toContain('PONG');
    }
  });

  it('webhook-dispatcher may not publish another service’s event, an audit record of another, or delete the stream', async () => {
    const forbidden = [
      'custos.events.policy.created',
      'custos.events.audit.recorded.vault-crypto',
      'custos.events.share.email_requested',
      '$JS.API.STREAM.DELETE.CUSTOS_EVENTS',
      '$JS.API.STREAM.PURGE.CUSTOS_EVENTS',
    ];
    const answers = await session(
      port,
      NATS_USERS['webhook-dispatcher']!,
      testNatsPassword('webhook-dispatcher'),
      forbidden.map(pub),
    );
    expect(answers[0]).toBe('+OK'); // CONNECT
    for (const subject of forbidden)
      expect(answers).toContainEqual(
        expect.stringContaining(`Permissions Violation for Publish to "${subject}"`),
      );
  });

  it('a service may not listen on another service’s replies', async () => {
    const answers = await session(
      port,
      NATS_USERS['webhook-dispatcher']!,
      testNatsPassword('webhook-dispatcher'),
      [sub('_INBOX_vault-crypto.>', 1)],
    );
    expect(answers).toContainEqual(
      expect.stringContaining('Permissions Violation for Subscription to "_INBOX_vault-crypto.>"'),
    );
  });
});
