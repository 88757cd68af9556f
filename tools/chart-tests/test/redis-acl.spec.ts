// Redis users per service, as the chart wires them: each service that uses Redis gets its REDIS_URL
// from its own Secret (its existingSecret, or <prefix>-<service>-credentials with a URL the chart
// builds from redis.host/port/db and the user's inline password), never another's; the ConfigMap
// <prefix>-redis-acl holds an ACL file with the default user off and one user per service with the
// rules of charts/custos/files/redis-acl.json (written by packages/service-kit) and the SHA-256 of
// its password. Checked on the rendered objects, then on a real redis-server that loads the
// rendered file and lets each service in through the URL the chart built for it.
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { REDIS_SERVICES, REDIS_USERS, SERVICES } from './facts';
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
  renderedSecretValue,
  scenarios,
  serviceEnv,
  sets,
  testRedisPassword,
} from './helm';

type Rules = { keys: string; channels: string; commands: string };

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
const RULES = JSON.parse(readFileSync(path.join(chartDir, 'files', 'redis-acl.json'), 'utf8')) as Record<
  string,
  Rules
>;
const aclName = `${release.name}-redis-acl`;

function aclLines(objects: K8sObject[]): string[] {
  return (named(objects, 'ConfigMap', aclName).data['users.acl'] as string).trimEnd().split('\n');
}

/** The REDIS_URL a service gets, decoded from the Secret the chart renders. */
function redisUrlOf(objects: K8sObject[], service: string): string {
  const ref = serviceEnv(objects, service).get('REDIS_URL').valueFrom.secretKeyRef;
  const url = renderedSecretValue(objects, ref);
  if (url === undefined) throw new Error(`${service}: REDIS_URL is not in a Secret the chart renders`);
  return url;
}

describe.each(scenarios)('Redis users rendered with $label', ({ args }) => {
  let objects: K8sObject[];
  beforeAll(() => {
    objects = renderChart(args);
  });

  it('each service that uses Redis gets REDIS_URL from its own Secret, and no other service gets one', () => {
    const refs = new Map<string, Json>();
    for (const s of SERVICES) {
      const entry = serviceEnv(objects, s).get('REDIS_URL');
      if (!REDIS_SERVICES.includes(s)) {
        expect({ s, entry }).toEqual({ s, entry: undefined });
        continue;
      }
      expect({ s, value: entry.value }).toEqual({ s, value: undefined });
      refs.set(s, entry.valueFrom.secretKeyRef);
      expect({ s, ref: entry.valueFrom.secretKeyRef }).toEqual({
        s,
        ref: { name: `${release.name}-${s}-credentials`, key: 'redis-url' },
      });
    }
    // No two services share a Secret reference.
    const seen = [...refs.values()].map((r) => `${r.name}/${r.key}`);
    expect(new Set(seen).size).toBe(REDIS_SERVICES.length);
  });

  it('renders an ACL file: the default user off, each service’s user with exactly its rules', () => {
    const lines = aclLines(objects);
    expect(lines[0]).toBe('user default reset off');
    expect(lines).toHaveLength(1 + REDIS_SERVICES.length);
    for (const s of REDIS_SERVICES) {
      const r = RULES[s]!;
      const line = lines.find((l) => l.startsWith(`user ${REDIS_USERS[s]} `));
      expect({ s, line }).toEqual({
        s,
        line: expect.stringMatching(/^user \S+ reset on #\S+ /),
      });
      expect(line!.endsWith(` ${r.keys} ${r.channels} ${r.commands}`)).toBe(true);
    }
    // Only identity writes revocations; only the gateway has the rate-limit keys.
    const writers = lines.filter((l) => / ~custos:revoked:\*/.test(l)).map((l) => l.split(' ')[1]);
    expect(writers).toEqual([REDIS_USERS.identity]);
    const rl = lines.filter((l) => l.includes('custos:rl:')).map((l) => l.split(' ')[1]);
    expect(rl).toEqual([REDIS_USERS.gateway]);
  });
});

describe('Redis credential values', () => {
  it('builds each URL from host, port, db and the user’s inline password (rediss:// with TLS)', () => {
    const objects = renderChart([
      ...REQUIRED_SETS,
      ...sets('redis.host=cache.internal', 'redis.port=6380', 'redis.db=2', 'redis.tls.enabled=true'),
    ]);
    for (const s of REDIS_SERVICES)
      expect(redisUrlOf(objects, s)).toBe(
        `rediss://${REDIS_USERS[s]}:${testRedisPassword(s)}@cache.internal:6380/2`,
      );
    const plain = renderChart(REQUIRED_SETS);
    expect(redisUrlOf(plain, 'billing')).toBe(
      `redis://custos_billing:${testRedisPassword('billing')}@redis:6379/0`,
    );
    // A private CA implies TLS.
    const withCa = renderChart([...REQUIRED_SETS, ...sets('redis.tls.caSecret=redis-ca')]);
    expect(redisUrlOf(withCa, 'gateway')).toMatch(/^rediss:\/\//);
  });

  it('the ConfigMap carries the SHA-256 of each inline password, never the password', () => {
    const objects = renderChart(REQUIRED_SETS);
    const cm = named(objects, 'ConfigMap', aclName);
    for (const s of REDIS_SERVICES) {
      expect(aclLines(objects)).toContainEqual(
        expect.stringMatching(
          new RegExp(`^user ${REDIS_USERS[s]} reset on #${sha256(testRedisPassword(s))} `),
        ),
      );
      expect(JSON.stringify(cm)).not.toContain(testRedisPassword(s));
    }
  });

  it('an existingSecret gives the service its REDIS_URL; the ACL line takes passwordSha256, or a placeholder naming the Secret', () => {
    const hash = sha256('the-policy-password-in-its-secret');
    const objects = renderChart([
      ...REQUIRED_SETS,
      ...sets(
        'redis.users.policy.existingSecret=policy-redis',
        'redis.users.policy.existingSecretKey=url',
        `redis.users.policy.passwordSha256=${hash}`,
        'redis.users.audit.existingSecret=audit-creds',
      ),
    ]);
    expect(serviceEnv(objects, 'policy').get('REDIS_URL').valueFrom.secretKeyRef).toEqual({
      name: 'policy-redis',
      key: 'url',
    });
    expect(serviceEnv(objects, 'audit').get('REDIS_URL').valueFrom.secretKeyRef).toEqual({
      name: 'audit-creds',
      key: 'redis-url',
    });
    // The chart builds no URL for them (an inline password would be ignored).
    expect(Object.keys(named(objects, 'Secret', `${release.name}-policy-credentials`).data)).not.toContain(
      'redis-url',
    );
    const lines = aclLines(objects);
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^user custos_policy reset on #${hash} `)));
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^user custos_audit reset on #SHA256_OF_THE_PASSWORD_IN_SECRET_audit-creds_KEY_redis-url /,
      ),
    );
    expect(named(objects, 'ConfigMap', aclName).data.README).toContain(
      'custos_audit (audit): Secret audit-creds, key redis-url  <- replace its placeholder',
    );
  });

  it('refuses a service without Redis credentials, naming the values to set', () => {
    const r = renderFailure([...REQUIRED_SETS, ...sets('redis.users.webhook-dispatcher.password=')]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(
      "redis: webhook-dispatcher needs its own Redis user's credentials: set redis.users.webhook-dispatcher.existingSecret",
    );
  });

  it('refuses two services with one Redis user', () => {
    const r = renderFailure([
      ...REQUIRED_SETS,
      ...sets('redis.users.webhook-dispatcher.user=custos_identity'),
    ]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/redis\.users: \S+ and \S+ are both the Redis user custos_identity/);
  });

  it('refuses the removed shared URL, saying what replaced it', () => {
    for (const old of ['redis.url=redis://:pw@redis:6379/0', 'redis.existingSecret=custos-redis']) {
      const r = renderFailure([...REQUIRED_SETS, ...sets(old)]);
      expect({ old, status: r.status === 0 }).toEqual({ old, status: false });
      expect(r.stderr).toMatch(
        /redis\.(url|existingSecret) was removed: .*redis\.users\.<service>\.existingSecret/,
      );
    }
  });

  it('the schema refuses a password a URL cannot carry as it is, or a hash that is not hex SHA-256', () => {
    for (const set of [
      'redis.users.gateway.password=short',
      'redis.users.gateway.password=has@at-sign-and-more',
      'redis.users.gateway.passwordSha256=abc',
      'redis.users.gateway.user=two words',
      'redis.host=redis/evil',
    ]) {
      const r = renderFailure([...REQUIRED_SETS, ...sets(set)]);
      expect({ set, status: r.status === 0 }).toEqual({ set, status: false });
    }
  });

  it('redis.auth.enabled=false (development): a plain URL without credentials, no Secret entry, no ConfigMap', () => {
    // The inline passwords of REQUIRED_SETS stay unused; without them it renders too.
    const objects = renderChart([...REQUIRED_SETS, ...sets('redis.auth.enabled=false')]);
    expect(
      renderChart([...REQUIRED_SETS, ...sets('redis.auth.enabled=false', 'redis.users.gateway.password=')]),
    ).not.toEqual([]);
    for (const s of REDIS_SERVICES)
      expect(serviceEnv(objects, s).get('REDIS_URL')).toEqual({
        name: 'REDIS_URL',
        value: 'redis://redis:6379/0',
      });
    expect(ofKind(objects, 'ConfigMap').map((c) => c.metadata.name)).not.toContain(aclName);
    for (const secret of ofKind(objects, 'Secret'))
      expect(Object.keys(secret.data ?? {})).not.toContain('redis-url');
  });

  it('aclConfigMap.enabled=false renders no ACL ConfigMap', () => {
    const objects = renderChart([...REQUIRED_SETS, ...sets('redis.aclConfigMap.enabled=false')]);
    expect(ofKind(objects, 'ConfigMap').map((c) => c.metadata.name)).not.toContain(aclName);
  });
});

// --- a real redis-server -------------------------------------------------------------------------

/** One reply of the Redis protocol: a status or error line, an integer, a string, or an array. */
type Reply = string | number | null | Reply[];

/** Reads one reply from `buf` at `at`; undefined when it is not complete yet. */
function parseReply(buf: string, at: number): { reply: Reply; next: number } | undefined {
  const eol = buf.indexOf('\r\n', at);
  if (eol < 0) return undefined;
  const head = buf.slice(at + 1, eol);
  switch (buf[at]) {
    case '+':
      return { reply: head, next: eol + 2 };
    case '-':
      return { reply: `ERR:${head}`, next: eol + 2 };
    case ':':
      return { reply: Number(head), next: eol + 2 };
    case '$': {
      const n = Number(head);
      if (n < 0) return { reply: null, next: eol + 2 };
      if (buf.length < eol + 2 + n + 2) return undefined;
      return { reply: buf.slice(eol + 2, eol + 2 + n), next: eol + 2 + n + 2 };
    }
    case '*': {
      const items: Reply[] = [];
      let next = eol + 2;
      for (let i = 0; i < Number(head); i++) {
        const r = parseReply(buf, next);
        if (!r) return undefined;
        items.push(r.reply);
        next = r.next;
      }
      return { reply: items, next };
    }
    default:
      throw new Error(`not a Redis reply: ${buf.slice(at)}`);
  }
}

/** Sends `commands` on one connection to 127.0.0.1:<port> and returns one reply per command. */
async function redisSession(port: number, commands: string[][]): Promise<Reply[]> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let buf = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`Redis session timed out: ${buf}`));
    }, 5000);
    socket.on('connect', () => {
      socket.write(
        commands
          .map((c) => `*${c.length}\r\n${c.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`)
          .join(''),
      );
    });
    socket.on('data', (d) => {
      buf += d.toString('utf8');
      const replies: Reply[] = [];
      let at = 0;
      while (at < buf.length) {
        const r = parseReply(buf, at);
        if (!r) return;
        replies.push(r.reply);
        at = r.next;
      }
      if (replies.length >= commands.length) {
        clearTimeout(timer);
        socket.destroy();
        resolve(replies);
      }
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
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

describe('the rendered ACL file on a real redis-server', () => {
  let dir: string;
  let server: ChildProcess;
  let port: number;
  let log = '';
  let objects: K8sObject[];
  /** AUTH with the user and password of the URL the chart built for `service`, then `commands`. */
  const as = (service: string, commands: string[][]) => {
    const url = new URL(redisUrlOf(objects, service));
    return redisSession(port, [['AUTH', url.username, url.password], ...commands]);
  };

  beforeAll(async () => {
    objects = renderChart(REQUIRED_SETS);
    dir = mkdtempSync(path.join(os.tmpdir(), 'custos-chart-redis-'));
    writeFileSync(path.join(dir, 'users.acl'), named(objects, 'ConfigMap', aclName).data['users.acl']);
    port = await freePort();
    // As the README says: the server loads the file as its aclfile.
    server = spawn(
      process.env.REDIS_SERVER_BIN || 'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
        '--aclfile',
        path.join(dir, 'users.acl'),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    server.stdout!.on('data', (d) => (log += d.toString()));
    server.stderr!.on('data', (d) => (log += d.toString()));
    for (let i = 0; i < 100; i++) {
      const up = await redisSession(port, [['PING']]).then(
        () => true,
        () => false,
      );
      if (up) return;
      if (server.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`redis-server did not start with the rendered ACL file:\n${log}`);
  });

  afterAll(async () => {
    if (server && server.exitCode === null) {
      server.kill('SIGTERM');
      await new Promise((r) => server.once('exit', r));
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('lets nobody in without a user: the default user is off', async () => {
    const [ping] = await redisSession(port, [['PING']]);
    expect(ping).toMatch(/^ERR:NOAUTH/);
    const [auth] = await redisSession(port, [['AUTH', testRedisPassword('gateway')]]);
    expect(auth).toMatch(/^ERR:WRONGPASS/);
  });

  it.each(REDIS_SERVICES)(
    '%s signs in through the URL the chart built and may read the revocations',
    async (s) => {
      const [auth, mget] = await as(s, [['MGET', 'custos:revoked:jti:x']]);
      expect({ s, auth, mget }).toEqual({ s, auth: 'OK', mget: [null] });
    },
  );

  it('only identity may write a revocation', async () => {
    const [, set] = await as('identity', [['SET', 'custos:revoked:jti:y', '1', 'PX', '60000']]);
    expect(set).toBe('OK');
    for (const s of REDIS_SERVICES.filter((x) => x !== 'identity')) {
      const [, write, del] = await as(s, [
        ['SET', 'custos:revoked:kid:active', '1'],
        ['DEL', 'custos:revoked:jti:y'],
      ]);
      expect({ s, write, del }).toEqual({
        s,
        write: expect.stringMatching(/^ERR:NOPERM/),
        del: expect.stringMatching(/^ERR:NOPERM/),
      });
    }
  });

  it('a revocation reader may not touch the rate-limit buckets or flush anything', async () => {
    const [, hset, flush, keys] = await as('webhook-dispatcher', [
      ['HSET', 'custos:rl:global:1.2.3.4', 't', '0'],
      ['FLUSHALL'],
      ['KEYS', '*'],
    ]);
    for (const r of [hset, flush, keys]) expect(r).toMatch(/^ERR:NOPERM/);
  });

  it('another service’s password does not open a user', async () => {
    const [auth] = await redisSession(port, [
      ['AUTH', REDIS_USERS['webhook-dispatcher']!, testRedisPassword('identity')],
    ]);
    expect(auth).toMatch(/^ERR:WRONGPASS/);
  });
});
