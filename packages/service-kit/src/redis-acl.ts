import { createHash } from 'node:crypto';

/**
 * What each service does in Redis, and the Redis 7 ACL user that allows exactly that. This table is
 * the one source of every service's Redis rights: the mesh launcher's redis-server gets an ACL file
 * rendered from it, and the chart's `files/redis-acl.json` is too (a test checks both against the
 * code). A service that could once do anything a shared password allowed can now only do its job:
 * a held webhook-dispatcher reads revocations but cannot delete them, mark a signing key revoked,
 * or touch the gateway's rate-limit buckets.
 */

/** The key patterns Custos uses in Redis. */
export const REDIS_KEY_PATTERNS = {
  /** Token revocations identity mirrors (`custos:revoked:<kind>:<value>`, @custos/auth revocationKey). */
  revoked: 'custos:revoked:*',
  /** The gateway's rate-limit buckets (`custos:rl:<scope>:<client>`). */
  rateLimit: 'custos:rl:*',
  /** Each org's decision generation (policyGenerationKey): policy bumps it, vault-crypto reads it. */
  policyGeneration: 'custos:policy:gen:*',
  /** Identity's count of wrong secrets per exchange key and minute (`custos:exref:<kind>:<key id>`). */
  wrongSecrets: 'custos:exref:*',
} as const;

/**
 * The Redis key of an org's decision generation: a value the policy service replaces with a fresh
 * UUID after it commits any change to the org's grants. A cached decision stamped with another
 * value is stale. Org ids are lower-cased here, so every caller names the same key.
 */
export function policyGenerationKey(orgId: string): string {
  return `custos:policy:gen:${orgId.toLowerCase()}`;
}

/** What one service does in Redis. */
export interface RedisServiceUse {
  /** Commands it sends, lower case. */
  readonly commands: readonly string[];
  /** Key patterns it reads and writes. */
  readonly readWrite: readonly string[];
  /** Key patterns it only reads. */
  readonly readOnly: readonly string[];
}

/**
 * What an ioredis connection sends before the service's own commands, and may: INFO (the ready
 * check; refused, ioredis warns on every connect) and SELECT (only for a URL naming a database
 * other than 0). Its CLIENT SETINFO is left out on purpose: ioredis ignores the refusal, Redis
 * before 7.2 has no such subcommand to allow, and CLIENT as a whole would list and kill other
 * connections.
 */
export const REDIS_CONNECT_COMMANDS: readonly string[] = ['info', 'select'];

/** A service that only checks token revocations: one MGET per verified token (@custos/auth). */
const REVOCATION_READER: RedisServiceUse = {
  commands: ['mget'],
  readWrite: [],
  readOnly: [REDIS_KEY_PATTERNS.revoked],
};

/** Every service that connects to Redis, with what it does there. */
export const REDIS_SERVICES = {
  // The token bucket (services/gateway/src/http/rate-limit.ts): EVALSHA, EVAL on a new connection
  // or after NOSCRIPT; HMGET, HSET and PEXPIRE inside the script, which Redis checks against this
  // user too. Plus the revocation check of every request.
  gateway: {
    commands: ['evalsha', 'eval', 'hmget', 'hset', 'pexpire', 'mget'],
    readWrite: [REDIS_KEY_PATTERNS.rateLimit],
    readOnly: [REDIS_KEY_PATTERNS.revoked],
  },
  // Mirrors revocations (SET … PX: revocation-store.ts, retire-key) and checks its own tokens (MGET);
  // reads decision generations (GET) before it reuses an agent's cached grant scopes; counts wrong
  // secrets per exchange key (wrong-secret-bucket.ts: EVALSHA, EVAL; INCR, PEXPIRE and PTTL inside
  // the script).
  identity: {
    commands: ['set', 'mget', 'get', 'evalsha', 'eval', 'incr', 'pexpire', 'pttl'],
    readWrite: [REDIS_KEY_PATTERNS.revoked, REDIS_KEY_PATTERNS.wrongSecrets],
    readOnly: [REDIS_KEY_PATTERNS.policyGeneration],
  },
  // Checks revocations, and reads each org's decision generation (GET) before it trusts a cached
  // policy decision (services/vault-crypto/src/access/decision-cache.ts).
  'vault-crypto': {
    commands: ['mget', 'get'],
    readWrite: [],
    readOnly: [REDIS_KEY_PATTERNS.revoked, REDIS_KEY_PATTERNS.policyGeneration],
  },
  // Checks revocations; moves an org's decision generation (SET of a fresh UUID) after each grant
  // change it commits.
  policy: {
    commands: ['mget', 'set'],
    readWrite: [REDIS_KEY_PATTERNS.policyGeneration],
    readOnly: [REDIS_KEY_PATTERNS.revoked],
  },
  audit: REVOCATION_READER,
  'webhook-dispatcher': REVOCATION_READER,
  billing: REVOCATION_READER,
  signer: REVOCATION_READER,
  approvals: REVOCATION_READER,
} as const satisfies Record<string, RedisServiceUse>;

/** A service that connects to Redis. */
export type RedisService = keyof typeof REDIS_SERVICES;

/** The services that connect to Redis, in a stable order. */
export const REDIS_SERVICE_NAMES = Object.keys(REDIS_SERVICES) as RedisService[];

/** True when `name` is a service that connects to Redis. */
export function isRedisService(name: string): name is RedisService {
  return Object.prototype.hasOwnProperty.call(REDIS_SERVICES, name);
}

/**
 * A service's Redis user: `custos_<service>` with `-` as `_`, the name of its Postgres role and of
 * its NATS user in the chart.
 */
export function redisUserOf(service: RedisService): string {
  return `custos_${service.replace(/-/g, '_')}`;
}

/** The user with every right that tests may use (never given to a service, never in the chart). */
export const REDIS_TEST_USER = 'custos_test';

/**
 * A user's rules in three parts, as the Bitnami Redis chart's `auth.acl.users` entries take them:
 * key patterns, channels and commands.
 */
export interface RedisAclRules {
  /** `~pattern` (read and write) and `%R~pattern` (read only). */
  keys: string;
  /** Always `resetchannels`: no service uses pub/sub. */
  channels: string;
  /** `-@all`, then `+command` for each command it sends. */
  commands: string;
}

/** The rules of `service`: its key patterns, no channels, and only the commands it sends. */
export function redisAclRules(service: RedisService): RedisAclRules {
  const use: RedisServiceUse = REDIS_SERVICES[service];
  return {
    keys: [...use.readWrite.map((p) => `~${p}`), ...use.readOnly.map((p) => `%R~${p}`)].join(' '),
    channels: 'resetchannels',
    commands: ['-@all', ...[...REDIS_CONNECT_COMMANDS, ...use.commands].map((c) => `+${c}`)].join(' '),
  };
}

/** The rules as one string, in the order of an ACL file line: keys, channels, commands. */
export function redisAclRuleText(rules: RedisAclRules): string {
  return `${rules.keys} ${rules.channels} ${rules.commands}`;
}

/** Hex SHA-256 of a password: what an ACL file stores (`#<hash>`) instead of the password. */
export function redisPasswordSha256(password: string): string {
  return createHash('sha256').update(password, 'utf8').digest('hex');
}

/** An ACL user's password: in clear (hashed here) or already hashed (hex SHA-256). */
export type RedisAclPassword = { plain: string } | { sha256: string };

/**
 * One ACL file line, `user <name> reset on #<sha256> <rules>`: `reset` first, so that the line
 * means the same given to `ACL SETUSER` on an existing user.
 */
export function redisAclUserLine(user: string, password: RedisAclPassword, rules: string): string {
  if (!/^[A-Za-z0-9_.-]+$/.test(user)) throw new Error(`not a Redis user name for an ACL file: ${user}`);
  const hash = 'plain' in password ? redisPasswordSha256(password.plain) : password.sha256;
  if (!/^[0-9a-f]{64}$/.test(hash)) throw new Error(`the password hash of ${user} is not hex SHA-256`);
  return `user ${user} reset on #${hash} ${rules}`;
}

/** The `default` user, off: a connection that does not name a user and its password is nobody. */
export const REDIS_DEFAULT_USER_OFF = 'user default reset off';

/** What a mesh's ACL file needs. */
export interface RedisAclFileOptions {
  /** Each service's password. */
  passwords: Readonly<Record<RedisService, string>>;
  /** When given, the test user with every right and this password (tests only). */
  testPassword?: string;
}

/**
 * A whole ACL file (`redis-server --aclfile`): the `default` user off, one user per service
 * (redisUserOf) with its rules, and, when asked, the test user with every right.
 */
export function redisAclFile(o: RedisAclFileOptions): string {
  // No comment lines: redis-server refuses an ACL file with any line but `user …`.
  const lines = [
    REDIS_DEFAULT_USER_OFF,
    ...REDIS_SERVICE_NAMES.map((s) =>
      redisAclUserLine(redisUserOf(s), { plain: o.passwords[s] }, redisAclRuleText(redisAclRules(s))),
    ),
  ];
  if (o.testPassword !== undefined)
    lines.push(redisAclUserLine(REDIS_TEST_USER, { plain: o.testPassword }, '~* &* +@all'));
  return `${lines.join('\n')}\n`;
}

/**
 * Every service's rules: the content of `charts/custos/files/redis-acl.json`, from which the chart
 * renders the ACL lines of the users named in its values.
 */
export function chartRedisAcl(): Record<RedisService, RedisAclRules> {
  const out = {} as Record<RedisService, RedisAclRules>;
  for (const s of REDIS_SERVICE_NAMES) out[s] = redisAclRules(s);
  return out;
}

/** The JSON text of `files/redis-acl.json` (two-space indent, final newline). */
export function chartRedisAclJson(): string {
  return `${JSON.stringify(chartRedisAcl(), null, 2)}\n`;
}
