import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import { describeError, type Logger } from './logger.js';
import { pgTlsProblem } from './pg-tls.js';

/** A Drizzle database bound to a pool. */
export type Database = NodePgDatabase<Record<string, never>>;

/**
 * Opens a pool to `url`. A connection's failure (the server restarting, a failover, a network cut)
 * is logged and never thrown: pg emits 'error' on a client whose connection dies, and pg-pool only
 * listens while the client is idle, so a checked-out one (a transaction in flight, the outbox
 * relay's leader connection) with no listener of its own would end the process. Every client gets
 * one when it is made; the query in flight still fails (the caller answers 503), the pool drops the
 * dead client when it is released, and the next checkout connects anew.
 */
export function createPool(url: string, max: number, logger: Logger, applicationName: string): pg.Pool {
  // TLS: from the URL (`?sslmode=verify-full&sslrootcert=<CA file>`, see docs/dependencies.md); a
  // setting that would verify the wrong name is refused rather than half-applied.
  const tlsProblem = pgTlsProblem(url);
  if (tlsProblem) throw new Error(`Postgres URL refused: ${tlsProblem}`);
  const pool = new pg.Pool({
    connectionString: url,
    max,
    application_name: applicationName,
    keepAlive: true,
    // TCP keepalive from 10 s of silence (the kernel's default is 2 h): a connection to a server
    // that vanished without a word (a failover that moved its address) is found dead in minutes,
    // not hours. The kernel's probe interval and count still apply after the first probe.
    keepAliveInitialDelayMillis: 10_000,
    // A connect that hangs (a server that accepts but does not answer) must not hold a request
    // forever; pg-pool applies the same bound to waiting for a free connection of the pool.
    connectionTimeoutMillis: 10_000,
  });
  pool.on('connect', (client) => {
    client.on('error', (err) =>
      logger.warn({ err: describeError(err) }, 'Postgres connection failed; it will be replaced'),
    );
  });
  pool.on('error', (err) => logger.warn({ err: describeError(err) }, 'idle Postgres client failed'));
  return pool;
}

/** Wraps a pool in Drizzle. */
export function createDatabase(pool: pg.Pool): Database {
  return drizzle(pool);
}

/**
 * Runs `fn` in one transaction on one connection of `pool`, for hand-written SQL on a hot path:
 * COMMIT when it returns, ROLLBACK when it throws. A connection that failed to BEGIN or to roll back
 * is destroyed rather than handed back to the pool.
 */
export async function withPgTransaction<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  let broken = false;
  try {
    try {
      await client.query('BEGIN');
    } catch (err) {
      broken = true;
      throw err;
    }
    try {
      const out = await fn(client);
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
      throw err;
    }
  } finally {
    client.release(broken);
  }
}

/** Runs `fn` on one connection holding the migration lock of `schema` (one migrator per schema at a time). */
async function withMigrationLock<T>(
  pool: pg.Pool,
  schema: string,
  fn: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [`custos.migrate.${schema}`]);
    try {
      return await fn(client);
    } finally {
      await client.query('SELECT pg_advisory_unlock(hashtext($1))', [`custos.migrate.${schema}`]);
    }
  } finally {
    client.release();
  }
}

/** Where drizzle records applied migrations, in each service's own schema; the service role never sees it. */
const MIGRATIONS_TABLE = '__drizzle_migrations';

/**
 * Applies a service's migrations, recording them in its own schema. An advisory lock keyed by the
 * schema name makes concurrent replicas (or a migration Job racing a pod) apply them once.
 */
export async function migrateSchema(
  pool: pg.Pool,
  opts: { schema: string; migrationsFolder: string },
): Promise<void> {
  await withMigrationLock(pool, opts.schema, (client) =>
    migrate(drizzle(client), {
      migrationsFolder: opts.migrationsFolder,
      migrationsSchema: opts.schema,
      migrationsTable: MIGRATIONS_TABLE,
    }),
  );
}

/** A privilege a service role may hold on a table of its schema. */
export type TablePrivilege = 'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE';

/** What a service role gets on every table of its schema unless its migrate entry says otherwise. */
export const DEFAULT_TABLE_PRIVILEGES: readonly TablePrivilege[] = ['SELECT', 'INSERT', 'UPDATE', 'DELETE'];

/** The login role a service connects as: `custos_<name>`, dashes as underscores (`custos_vault_crypto`). */
export function serviceRoleName(service: string): string {
  return `custos_${service.replace(/-/g, '_')}`;
}

/** The database role of one service and what it may do in its schema. */
export interface ServiceRoleOptions {
  /** The schema the role works in; nothing outside it is granted. */
  schema: string;
  /** The login role (a plain lower-case identifier). */
  role: string;
  /** When set, the role logs in with this password (set again on every run); else its password is left alone. */
  password?: string;
  /**
   * Tables (by name, in `schema`) whose privileges differ from DEFAULT_TABLE_PRIVILEGES, e.g. an
   * append-only table: `{ events: ['SELECT', 'INSERT'] }`. Naming a table that does not exist fails.
   */
  tablePrivileges?: Readonly<Record<string, readonly TablePrivilege[]>>;
}

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;
const PRIVILEGES = new Set<string>(DEFAULT_TABLE_PRIVILEGES);

/** `"name"`, for identifiers already checked against IDENTIFIER (or read from the catalogue). */
function ident(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * The SCRAM-SHA-256 verifier of `password` (RFC 5802/7677), in the form Postgres stores: the
 * password itself never reaches the server, so it cannot turn up in a statement log.
 */
export function scramVerifier(password: string, salt: Buffer = randomBytes(16), iterations = 4096): string {
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

/** Roles are cluster-wide: another database of the cluster may be creating or altering the same one. */
function lostRoleRace(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return (
    e.code === '42710' || // duplicate_object
    e.code === '23505' || // unique_violation (pg_authid's name index)
    (e.code === 'XX000' && /tuple concurrently updated/.test(e.message ?? ''))
  );
}

/** Creates the role if missing (LOGIN), or makes an existing one LOGIN; sets the password when given. */
async function ensureLoginRole(
  client: pg.PoolClient,
  role: string,
  password: string | undefined,
): Promise<void> {
  const secret = password === undefined ? '' : ` PASSWORD ${client.escapeLiteral(scramVerifier(password))}`;
  for (let attempt = 0; ; attempt++) {
    try {
      const { rows } = await client.query<{ rolcanlogin: boolean }>(
        'SELECT rolcanlogin FROM pg_roles WHERE rolname = $1',
        [role],
      );
      if (rows.length === 0) await client.query(`CREATE ROLE ${ident(role)} LOGIN${secret}`);
      else if (!rows[0]!.rolcanlogin || password !== undefined)
        await client.query(`ALTER ROLE ${ident(role)} LOGIN${secret}`);
      return;
    } catch (err) {
      if (!lostRoleRace(err) || attempt >= 5) throw err;
      await new Promise((r) => setTimeout(r, 50 + Math.random() * 200));
    }
  }
}

/**
 * Predefined roles that read or write every table of the database. They exist from PostgreSQL 14;
 * on 13 there are none, so the check below tests only the names the server knows (naming a missing
 * role to pg_has_role is an error, which failed every migration Job on 13).
 */
export const ALL_DATA_ROLES: readonly string[] = ['pg_read_all_data', 'pg_write_all_data'];

/**
 * Refuses a role that would hold more than its grants: an owner, a member of the owner or of one of
 * `allDataRoles` (those that exist on this server), or a privileged role. Exported for its test.
 */
export async function checkRoleIsPlain(
  client: pg.PoolClient | pg.Client,
  role: string,
  schema: string,
  allDataRoles: readonly string[] = ALL_DATA_ROLES,
): Promise<void> {
  const { rows } = await client.query<{
    powers: string[];
    owner_member: boolean;
    owned: string[];
    member_of: string[];
  }>(
    `SELECT array_remove(ARRAY[
              CASE WHEN r.rolsuper THEN 'SUPERUSER' END, CASE WHEN r.rolcreaterole THEN 'CREATEROLE' END,
              CASE WHEN r.rolcreatedb THEN 'CREATEDB' END, CASE WHEN r.rolreplication THEN 'REPLICATION' END,
              CASE WHEN r.rolbypassrls THEN 'BYPASSRLS' END], NULL) AS powers,
            pg_has_role(r.oid, n.nspowner, 'USAGE')
              OR EXISTS (SELECT FROM pg_roles a
                          WHERE a.rolname = ANY($3::text[]) AND pg_has_role(r.oid, a.oid, 'USAGE')) AS owner_member,
            ARRAY(SELECT c.relname::text FROM pg_class c
                   WHERE c.relnamespace = n.oid AND c.relowner = r.oid ORDER BY 1) AS owned,
            ARRAY(SELECT g.rolname::text FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                   WHERE m.member = r.oid ORDER BY 1) AS member_of
       FROM pg_roles r, pg_namespace n
      WHERE r.rolname = $1 AND n.nspname = $2`,
    [role, schema, allDataRoles],
  );
  const r = rows[0];
  if (!r) throw new Error(`schema ${schema} or role ${role} does not exist after the migrations`);
  if (r.powers.length > 0)
    throw new Error(
      `service role ${role} has ${r.powers.join(', ')}; a service role must be a plain login role`,
    );
  if (r.owner_member)
    throw new Error(
      `service role ${role} is (or is a member of) the owner of schema ${schema} or a pg_*_all_data role; it must be a separate role`,
    );
  if (r.owned.length > 0)
    throw new Error(
      `service role ${role} owns ${r.owned.join(', ')} in schema ${schema}; reassign them to the owner`,
    );
  // Membership would bring another role's privileges (another service's, pg_read_server_files, …).
  if (r.member_of.length > 0)
    throw new Error(
      `service role ${role} is a member of ${r.member_of.join(', ')}; a service role must hold only its own grants`,
    );
}

/**
 * Makes `role` a login role with exactly these privileges in its schema, whatever it held before:
 * USAGE on the schema (no CREATE), DEFAULT_TABLE_PRIVILEGES (or the table's override) on every
 * table, USAGE and SELECT on every sequence, EXECUTE on the schema's functions; nothing on the
 * migrations table. Run as the schema owner after the migrations and on every run (new tables are
 * covered then); the grants change in one transaction, so a running service never sees them half
 * applied. Safe to run concurrently, here and in other databases of the cluster.
 */
export async function provisionServiceRole(pool: pg.Pool, opts: ServiceRoleOptions): Promise<void> {
  const { schema, role } = opts;
  if (!IDENTIFIER.test(role)) throw new Error(`service role "${role}" is not a plain lower-case identifier`);
  if (!IDENTIFIER.test(schema)) throw new Error(`schema "${schema}" is not a plain lower-case identifier`);
  for (const [table, privileges] of Object.entries(opts.tablePrivileges ?? {})) {
    const bad = privileges.filter((p) => !PRIVILEGES.has(p));
    if (bad.length > 0)
      throw new Error(`privileges of ${schema}.${table}: ${bad.join(', ')} may not be granted`);
  }
  await withMigrationLock(pool, schema, async (client) => {
    const { rows: me } = await client.query<{ u: string }>('SELECT current_user AS u');
    if (me[0]!.u === role) throw new Error(`the service role ${role} is the user running the migrations`);
    await ensureLoginRole(client, role, opts.password);
    await checkRoleIsPlain(client, role, schema);
    await client.query('BEGIN');
    try {
      await applyGrants(client, opts);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  });
}

async function applyGrants(client: pg.PoolClient, opts: ServiceRoleOptions): Promise<void> {
  const { schema, role } = opts;
  const s = ident(schema);
  const r = ident(role);
  const { rows } = await client.query<{ name: string; kind: string }>(
    `SELECT c.relname AS name, c.relkind::text AS kind FROM pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
      ORDER BY c.relname`,
    [schema],
  );
  const overrides = new Map(Object.entries(opts.tablePrivileges ?? {}));
  const tables = new Set(rows.filter((x) => x.kind !== 'S').map((x) => x.name));
  const unknown = [...overrides.keys()].filter((t) => !tables.has(t) || t === MIGRATIONS_TABLE);
  if (unknown.length > 0)
    throw new Error(
      `privileges are declared for ${unknown.map((t) => `${schema}.${t}`).join(', ')}, which is no table`,
    );

  await client.query(`REVOKE ALL ON SCHEMA ${s} FROM PUBLIC, ${r}`);
  await client.query(`GRANT USAGE ON SCHEMA ${s} TO ${r}`);
  for (const { name, kind } of rows) {
    const t = `${s}.${ident(name)}`;
    if (kind === 'S') {
      await client.query(`REVOKE ALL ON SEQUENCE ${t} FROM ${r}`);
      if (!name.startsWith(MIGRATIONS_TABLE))
        await client.query(`GRANT USAGE, SELECT ON SEQUENCE ${t} TO ${r}`);
      continue;
    }
    await client.query(`REVOKE ALL ON TABLE ${t} FROM ${r}`);
    if (name === MIGRATIONS_TABLE) continue;
    const privileges = overrides.get(name) ?? DEFAULT_TABLE_PRIVILEGES;
    if (privileges.length > 0) await client.query(`GRANT ${privileges.join(', ')} ON TABLE ${t} TO ${r}`);
  }
  await client.query(`GRANT EXECUTE ON ALL ROUTINES IN SCHEMA ${s} TO ${r}`);
}

/** A transaction of a Database (what `db.transaction` hands its callback). */
export type Transaction = Parameters<Parameters<Database['transaction']>[0]>[0];

/**
 * Serialises, until the end of `tx`, every transaction that takes the same lock for this org and
 * resource: count-then-insert under it cannot overshoot a cap however many requests race.
 */
export async function lockOrgResource(tx: Transaction, orgId: string, resource: string): Promise<void> {
  await tx.execute(
    sql`SELECT pg_advisory_xact_lock(hashtext(${`custos.cap.${resource}`}), hashtext(${orgId}))`,
  );
}
