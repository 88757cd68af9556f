import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createLogger, createPool, provisionServiceRole, scramVerifier } from '../src';
import { ALL_DATA_ROLES, checkRoleIsPlain } from '../src/db';
import { createTestDatabase, testPostgresUrl } from '../src/testing';

const logger = createLogger({ service: 'db-roles-test', level: 'silent' });

/** `url` with `user` as its user and no password (the test server trusts loopback). */
function as(url: string, user: string): string {
  const u = new URL(url);
  u.username = user;
  u.password = '';
  return u.toString();
}

/** Runs one statement as `user`; resolves to the rows, or rejects with Postgres' refusal. */
async function run(url: string, user: string, text: string): Promise<unknown[]> {
  const c = new pg.Client({ connectionString: as(url, user) });
  await c.connect();
  try {
    return (await c.query(text)).rows;
  } finally {
    await c.end();
  }
}

// What a service's migrations leave behind: tables with a sequence, drizzle's bookkeeping, an
// append-only table and a function.
const SCHEMA_SQL = `
  CREATE SCHEMA app;
  CREATE TABLE app.items (id bigserial PRIMARY KEY, name text NOT NULL);
  CREATE TABLE app.ledger (id bigserial PRIMARY KEY, entry text NOT NULL);
  CREATE TABLE app.__drizzle_migrations (id serial PRIMARY KEY, hash text NOT NULL, created_at bigint);
  CREATE FUNCTION app.add_item(p text) RETURNS void LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog AS $$ INSERT INTO app.items (name) VALUES (p) $$;
  REVOKE EXECUTE ON FUNCTION app.add_item(text) FROM PUBLIC;
  CREATE SCHEMA other;
  CREATE TABLE other.secrets (id int PRIMARY KEY);
`;

describe('provisionServiceRole', () => {
  const role = `custos_test_${randomBytes(4).toString('hex')}`;
  const databases: Array<Awaited<ReturnType<typeof createTestDatabase>>> = [];
  const pools: pg.Pool[] = [];
  let url: string;
  let owner: pg.Pool;

  async function database(): Promise<{ url: string; pool: pg.Pool }> {
    const d = await createTestDatabase('custos_roles');
    databases.push(d);
    const pool = createPool(d.url, 4, logger, 'db-roles-test');
    pools.push(pool);
    await pool.query(SCHEMA_SQL);
    return { url: d.url, pool };
  }

  const provision = (pool: pg.Pool, password?: string) =>
    provisionServiceRole(pool, {
      schema: 'app',
      role,
      tablePrivileges: { ledger: ['SELECT', 'INSERT'] },
      ...(password !== undefined ? { password } : {}),
    });

  beforeAll(async () => {
    ({ url, pool: owner } = await database());
  });

  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
    await Promise.all(databases.map((d) => d.drop()));
    const admin = new pg.Client({ connectionString: testPostgresUrl() });
    await admin.connect();
    await admin.query(`DROP ROLE IF EXISTS ${role}`);
    await admin.end();
  });

  it('creates the login role once however many migrators race, here and in other databases', async () => {
    const other = await database();
    await Promise.all([provision(owner), provision(owner), provision(other.pool), provision(other.pool)]);
    const roles = await owner.query<{ rolcanlogin: boolean; rolsuper: boolean }>(
      'SELECT rolcanlogin, rolsuper FROM pg_roles WHERE rolname = $1',
      [role],
    );
    expect(roles.rows).toEqual([{ rolcanlogin: true, rolsuper: false }]);
    for (const db of [url, other.url])
      expect(await run(db, role, `SELECT current_user AS u, count(*)::int AS n FROM app.items`)).toEqual([
        { u: role, n: 0 },
      ]);
  });

  it('lets the role read and write its tables, and append to an overridden one', async () => {
    await provision(owner);
    await run(url, role, `INSERT INTO app.items (name) VALUES ('a')`);
    await run(url, role, `UPDATE app.items SET name = 'b'`);
    expect(await run(url, role, `SELECT name FROM app.items`)).toEqual([{ name: 'b' }]);
    await run(url, role, `DELETE FROM app.items`);
    await run(url, role, `INSERT INTO app.ledger (entry) VALUES ('x')`);
    expect(await run(url, role, `SELECT entry FROM app.ledger`)).toEqual([{ entry: 'x' }]);
    await run(url, role, `SELECT app.add_item('via function')`);
    expect(await run(url, role, `SELECT name FROM app.items`)).toEqual([{ name: 'via function' }]);
  });

  it.each([
    [
      'update an append-only table',
      `UPDATE app.ledger SET entry = 'y'`,
      /permission denied for table ledger/,
    ],
    ['delete from an append-only table', `DELETE FROM app.ledger`, /permission denied for table ledger/],
    ['truncate', `TRUNCATE app.items`, /permission denied for table items/],
    ['alter its tables', `ALTER TABLE app.items ADD COLUMN x int`, /must be owner of table items/],
    ['disable a trigger', `ALTER TABLE app.ledger DISABLE TRIGGER ALL`, /must be owner of table ledger/],
    ['create in its schema', `CREATE TABLE app.mine (id int)`, /permission denied for schema app/],
    ['create in public', `CREATE TABLE public.mine (id int)`, /permission denied for schema public/],
    ['create a schema', `CREATE SCHEMA mine`, /permission denied for database/],
    ['read another schema', `SELECT * FROM other.secrets`, /permission denied for schema other/],
    [
      'read the migrations table',
      `SELECT * FROM app.__drizzle_migrations`,
      /permission denied for table __drizzle_migrations/,
    ],
    [
      'write the migrations table',
      `INSERT INTO app.__drizzle_migrations (hash) VALUES ('x')`,
      /permission denied/,
    ],
    [
      'move a sequence',
      `SELECT setval('app.items_id_seq', 1000)`,
      /permission denied for sequence items_id_seq/,
    ],
  ])('refuses the role to %s', async (_what, statement, refusal) => {
    await provision(owner);
    await expect(run(url, role, statement)).rejects.toThrow(refusal);
  });

  it('re-applies the grants on every run: new tables are covered, extra privileges go', async () => {
    await provision(owner);
    await owner.query(`CREATE TABLE app.later (id int)`);
    await owner.query(`GRANT TRUNCATE, TRIGGER, REFERENCES ON app.items TO ${role}`);
    await owner.query(`GRANT CREATE ON SCHEMA app TO ${role}`);
    await owner.query(`GRANT UPDATE ON app.ledger TO ${role}`);
    await expect(run(url, role, `SELECT * FROM app.later`)).rejects.toThrow(/permission denied/);

    await provision(owner);
    await run(url, role, `INSERT INTO app.later VALUES (1)`);
    const privileges = await owner.query<{ table_name: string; privilege_type: string }>(
      `SELECT table_name, privilege_type FROM information_schema.role_table_grants
        WHERE grantee = $1 AND table_schema = 'app' ORDER BY 1, 2`,
      [role],
    );
    const rw = ['DELETE', 'INSERT', 'SELECT', 'UPDATE'];
    expect(privileges.rows.map((r) => `${r.table_name} ${r.privilege_type}`)).toEqual([
      ...rw.map((p) => `items ${p}`),
      ...rw.map((p) => `later ${p}`),
      'ledger INSERT',
      'ledger SELECT',
    ]);
    const schema = await owner.query<{ usage: boolean; create: boolean }>(
      `SELECT has_schema_privilege($1, 'app', 'USAGE') AS usage, has_schema_privilege($1, 'app', 'CREATE') AS create`,
      [role],
    );
    expect(schema.rows).toEqual([{ usage: true, create: false }]);
  });

  it('sets the password as a SCRAM verifier Postgres accepts, never in clear', async () => {
    const password = randomBytes(12).toString('base64url');
    await provision(owner, password);
    const { rows } = await owner.query<{ rolpassword: string }>(
      'SELECT rolpassword FROM pg_authid WHERE rolname = $1',
      [role],
    );
    const stored = rows[0]!.rolpassword;
    const m = /^SCRAM-SHA-256\$(\d+):([^$]+)\$/.exec(stored);
    expect(m).not.toBeNull();
    expect(scramVerifier(password, Buffer.from(m![2]!, 'base64'), Number(m![1]))).toBe(stored);
    // Postgres' own verifier for the same password, salt and iterations is the same string.
    const probe = `${role}_probe`;
    await owner.query(`SET password_encryption = 'scram-sha-256'`);
    await owner.query(`CREATE ROLE ${probe} PASSWORD '${password}'`);
    try {
      const theirs = (
        await owner.query<{ rolpassword: string }>('SELECT rolpassword FROM pg_authid WHERE rolname = $1', [
          probe,
        ])
      ).rows[0]!.rolpassword;
      const [, iterations, salt] = /^SCRAM-SHA-256\$(\d+):([^$]+)\$/.exec(theirs)!;
      expect(scramVerifier(password, Buffer.from(salt!, 'base64'), Number(iterations))).toBe(theirs);
    } finally {
      await owner.query(`DROP ROLE ${probe}`);
    }
  });

  it('refuses a privileged role, the owner itself, and privileges for a table that does not exist', async () => {
    const strong = `${role}_strong`;
    await owner.query(`CREATE ROLE ${strong} LOGIN CREATEROLE`);
    try {
      await expect(provisionServiceRole(owner, { schema: 'app', role: strong })).rejects.toThrow(
        /has CREATEROLE; a service role must be a plain login role/,
      );
    } finally {
      await owner.query(`DROP ROLE ${strong}`);
    }
    const member = `${role}_member`;
    await owner.query(`CREATE ROLE ${member} LOGIN`);
    await owner.query(`GRANT pg_read_server_files TO ${member}`);
    try {
      await expect(provisionServiceRole(owner, { schema: 'app', role: member })).rejects.toThrow(
        /is a member of pg_read_server_files; a service role must hold only its own grants/,
      );
    } finally {
      await owner.query(`DROP ROLE ${member}`);
    }
    await expect(provisionServiceRole(owner, { schema: 'app', role: 'postgres' })).rejects.toThrow(
      /is the user running the migrations/,
    );
    await expect(
      provisionServiceRole(owner, { schema: 'app', role, tablePrivileges: { legder: ['SELECT'] } }),
    ).rejects.toThrow(/declared for app\.legder, which is no table/);
    await expect(
      provisionServiceRole(owner, { schema: 'app', role: 'Robert"; DROP TABLE x; --' }),
    ).rejects.toThrow(/not a plain lower-case identifier/);
  });

  it('refuses a role that reaches pg_read_all_data through another role', async () => {
    const via = `${role}_via`;
    const reader = `${role}_reader`;
    await owner.query(`CREATE ROLE ${via} NOLOGIN`);
    await owner.query(`GRANT pg_read_all_data TO ${via}`);
    await owner.query(`CREATE ROLE ${reader} LOGIN`);
    await owner.query(`GRANT ${via} TO ${reader}`);
    try {
      await expect(provisionServiceRole(owner, { schema: 'app', role: reader })).rejects.toThrow(
        /is \(or is a member of\) the owner of schema app or a pg_\*_all_data role/,
      );
    } finally {
      await owner.query(`DROP ROLE ${reader}`);
      await owner.query(`DROP ROLE ${via}`);
    }
  });

  // PostgreSQL 13 has no pg_read_all_data / pg_write_all_data, and pg_has_role(…, '<missing>', …)
  // is an error there: the check must test only the roles the server knows. A name no server has
  // stands in for them here (this server is newer).
  it('checks only the all-data roles this server has (PostgreSQL 13 has none)', async () => {
    const missing = `custos_no_such_role_${randomBytes(4).toString('hex')}`;
    await provision(owner);
    const client = await owner.connect();
    try {
      await expect(checkRoleIsPlain(client, role, 'app', [missing])).resolves.toBeUndefined();
      await expect(
        checkRoleIsPlain(client, role, 'app', [missing, ...ALL_DATA_ROLES]),
      ).resolves.toBeUndefined();
      const reader = `${role}_reader13`;
      const via = `${role}_via13`;
      await client.query(`CREATE ROLE ${via} NOLOGIN`);
      await client.query(`GRANT pg_write_all_data TO ${via}`);
      await client.query(`CREATE ROLE ${reader} LOGIN`);
      await client.query(`GRANT ${via} TO ${reader}`);
      try {
        // The missing name is skipped, the existing one still refuses.
        await expect(checkRoleIsPlain(client, reader, 'app', [missing, 'pg_write_all_data'])).rejects.toThrow(
          /pg_\*_all_data role/,
        );
      } finally {
        await client.query(`DROP ROLE ${reader}`);
        await client.query(`DROP ROLE ${via}`);
      }
    } finally {
      client.release();
    }
  });
});
