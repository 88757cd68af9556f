import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
  REDIS_CONNECT_COMMANDS,
  REDIS_KEY_PATTERNS,
  REDIS_SERVICES,
  REDIS_SERVICE_NAMES,
  chartRedisAcl,
  chartRedisAclJson,
  redisAclFile,
  redisAclRuleText,
  redisAclRules,
  redisAclUserLine,
  redisPasswordSha256,
  redisUserOf,
} from './redis-acl';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const CHART_FILE = path.join(ROOT, 'charts', 'custos', 'files', 'redis-acl.json');

/** Every .ts file under a folder (tests excluded), concatenated. */
function sourcesUnder(...parts: string[]): string {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts')) out.push(fs.readFileSync(p, 'utf8'));
    }
  };
  walk(path.join(ROOT, ...parts));
  return out.join('\n');
}

/** Redis client methods called in `src` (`redis.mget(`, `this.redis.set(`). */
function clientCalls(src: string): Set<string> {
  const calls = new Set<string>();
  for (const m of src.matchAll(/\bredis\??\.(\w+)\(/g)) calls.add(m[1]!.toLowerCase());
  // Connection management, a script's definition, and `redis.call` inside Lua (checked apart).
  for (const local of ['on', 'connect', 'disconnect', 'quit', 'definecommand', 'call']) calls.delete(local);
  return calls;
}

describe('redisAclRules', () => {
  it('lets a revocation reader MGET the revocations and nothing else', () => {
    expect(redisAclRules('webhook-dispatcher')).toEqual({
      keys: '%R~custos:revoked:*',
      channels: 'resetchannels',
      commands: '-@all +info +select +mget',
    });
  });

  it('lets the gateway run its bucket script on its own keys and read the revocations', () => {
    const r = redisAclRules('gateway');
    expect(r.keys).toBe('~custos:rl:* %R~custos:revoked:*');
    expect(r.commands.split(' ')).toEqual(
      expect.arrayContaining(['-@all', '+eval', '+evalsha', '+hmget', '+hset', '+pexpire', '+mget']),
    );
  });

  it('lets identity write revocations, and no one else', () => {
    expect(redisAclRules('identity').keys).toBe('~custos:revoked:* ~custos:exref:* %R~custos:policy:gen:*');
    for (const s of REDIS_SERVICE_NAMES.filter((x) => x !== 'identity'))
      expect({ s, keys: redisAclRules(s).keys }).not.toEqual({
        s,
        keys: expect.stringMatching(/(^| )~custos:revoked:/),
      });
  });

  it('lets policy alone write decision generations; vault-crypto and identity only read them', () => {
    expect(redisAclRules('policy').keys).toBe('~custos:policy:gen:* %R~custos:revoked:*');
    for (const s of REDIS_SERVICE_NAMES.filter((x) => x !== 'policy'))
      expect({ s, keys: redisAclRules(s).keys }).not.toEqual({
        s,
        keys: expect.stringMatching(/(^| )~custos:policy:gen:/),
      });
    expect(redisAclRules('vault-crypto').keys).toContain('%R~custos:policy:gen:*');
    expect(redisAclRules('identity').keys).toContain('%R~custos:policy:gen:*');
  });

  it('allows nothing broad to anyone', () => {
    for (const s of REDIS_SERVICE_NAMES) {
      const text = redisAclRuleText(redisAclRules(s));
      expect(text.startsWith(`${redisAclRules(s).keys} resetchannels -@all `)).toBe(true);
      expect(text).not.toMatch(
        /\+@|allkeys|allcommands|allchannels|~\*|&|\+(flushall|flushdb|config|keys|scan|debug|acl|module|client|del|unlink)\b/,
      );
    }
  });
});

describe('the ACL file', () => {
  const passwords = Object.fromEntries(REDIS_SERVICE_NAMES.map((s) => [s, `pw-${s}`])) as Record<
    (typeof REDIS_SERVICE_NAMES)[number],
    string
  >;

  it('turns the default user off and has one user per service with its password hashed', () => {
    const file = redisAclFile({ passwords });
    const lines = file.trimEnd().split('\n');
    expect(lines[0]).toBe('user default reset off');
    expect(lines).toHaveLength(1 + REDIS_SERVICE_NAMES.length);
    for (const s of REDIS_SERVICE_NAMES) {
      expect(lines).toContain(
        `user ${redisUserOf(s)} reset on #${redisPasswordSha256(`pw-${s}`)} ${redisAclRuleText(redisAclRules(s))}`,
      );
      expect(file).not.toContain(`pw-${s}`);
    }
    // redis-server refuses an ACL file with any other kind of line (comments included).
    for (const l of lines) expect(l).toMatch(/^user [a-z_]+ /);
  });

  it('adds the test user with every right only when asked', () => {
    expect(redisAclFile({ passwords })).not.toContain('custos_test');
    expect(redisAclFile({ passwords, testPassword: 't' })).toContain(
      `user custos_test reset on #${redisPasswordSha256('t')} ~* &* +@all`,
    );
  });

  it('refuses a user name or hash that would break the line', () => {
    expect(() => redisAclUserLine('a b', { plain: 'x' }, '')).toThrow(/user name/);
    expect(() => redisAclUserLine('a', { sha256: 'nothex' }, '')).toThrow(/SHA-256/);
    expect(redisPasswordSha256('abc')).toBe(
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
  });

  it('names each service as its Postgres role is named', () => {
    expect(redisUserOf('webhook-dispatcher')).toBe('custos_webhook_dispatcher');
    expect(redisUserOf('gateway')).toBe('custos_gateway');
  });
});

describe('the table against the code', () => {
  it('has exactly the services whose configuration reads REDIS_URL', () => {
    const services = fs.readdirSync(path.join(ROOT, 'services'));
    const readers = services.filter((s) => {
      const config = path.join(ROOT, 'services', s, 'src', 'config.ts');
      return fs.existsSync(config) && /\bREDIS_URL:/.test(fs.readFileSync(config, 'utf8'));
    });
    expect(readers.sort()).toEqual([...REDIS_SERVICE_NAMES].sort());
  });

  it('names the key prefixes the code writes and reads', () => {
    expect(sourcesUnder('packages', 'auth', 'src')).toContain('`custos:revoked:${kind}:${value}`');
    expect(REDIS_KEY_PATTERNS.revoked).toBe('custos:revoked:*');
    expect(sourcesUnder('services', 'gateway', 'src')).toMatch(/`custos:rl:\$\{/);
    expect(REDIS_KEY_PATTERNS.rateLimit).toBe('custos:rl:*');
    expect(sourcesUnder('services', 'identity', 'src')).toMatch(/`custos:exref:\$\{/);
    expect(REDIS_KEY_PATTERNS.wrongSecrets).toBe('custos:exref:*');
  });

  it('gives every revocation reader MGET, which the shared check sends', () => {
    expect([...clientCalls(sourcesUnder('packages', 'auth', 'src'))]).toEqual(['mget']);
    for (const s of REDIS_SERVICE_NAMES)
      expect({ s, mget: REDIS_SERVICES[s].commands }).toEqual({
        s,
        mget: expect.arrayContaining(['mget']),
      });
  });

  it.each(REDIS_SERVICE_NAMES)('%s: every command its own code sends is allowed', (service) => {
    const src = sourcesUnder('services', service, 'src');
    const allowed: readonly string[] = REDIS_SERVICES[service].commands;
    for (const c of clientCalls(src))
      expect({ service, c, allowed: allowed.includes(c) }).toEqual({
        service,
        c,
        allowed: true,
      });
    // Commands run inside a Lua script are checked against the same user.
    for (const m of src.matchAll(/redis\.call\('(\w+)'/g))
      expect({ service, c: m[1], allowed: allowed.includes(m[1]!.toLowerCase()) }).toEqual({
        service,
        c: m[1],
        allowed: true,
      });
    // A script defined with defineCommand is sent as EVAL, then EVALSHA.
    if (/defineCommand\(/.test(src)) expect(allowed).toEqual(expect.arrayContaining(['eval', 'evalsha']));
  });

  it('the gateway and identity send what the table says they do', () => {
    const gateway = sourcesUnder('services', 'gateway', 'src');
    expect([...gateway.matchAll(/redis\.call\('(\w+)'/g)].map((m) => m[1])).toEqual([
      'HMGET',
      'HSET',
      'PEXPIRE',
    ]);
    const identity = sourcesUnder('services', 'identity', 'src');
    expect([...clientCalls(identity)]).toEqual(['get', 'set']);
    expect([...identity.matchAll(/redis\.call\('(\w+)'/g)].map((m) => m[1])).toEqual([
      'INCR',
      'PEXPIRE',
      'PTTL',
    ]);
    expect(REDIS_CONNECT_COMMANDS).toEqual(['info', 'select']);
  });
});

describe('charts/custos/files/redis-acl.json', () => {
  it('holds what redisAclRules renders (UPDATE_REDIS_ACL=1 rewrites it)', () => {
    if (process.env.UPDATE_REDIS_ACL === '1') {
      fs.mkdirSync(path.dirname(CHART_FILE), { recursive: true });
      fs.writeFileSync(CHART_FILE, chartRedisAclJson());
      // Formatted by the repository's prettier, so `pnpm lint` accepts it as it is.
      execFileSync('pnpm', ['exec', 'prettier', '--write', CHART_FILE], { cwd: ROOT, stdio: 'ignore' });
    }
    const have: unknown = fs.existsSync(CHART_FILE) ? JSON.parse(fs.readFileSync(CHART_FILE, 'utf8')) : null;
    expect(have).toEqual(chartRedisAcl());
  });
});
