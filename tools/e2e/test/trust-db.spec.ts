import {
  DATABASE_SERVICES,
  type ServiceName,
  databaseRole,
  derivedRolePassword,
  roleUrl,
} from '@custos/mesh';
import pg from 'pg';
import { sqlOn } from '../src/db';
import { type Mesh, sharedMesh } from '../src/mesh';

// The database half of "no single part's compromise opens everything": each service connects as
// its own role, which reaches its own schema and nothing else, cannot change the shape of anything,
// and cannot touch audit records or add token-signing keys. Every statement runs in a transaction
// that is rolled back, so the shared mesh is left as it was.

type Privilege = 'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE';
const RW: readonly Privilege[] = ['SELECT', 'INSERT', 'UPDATE', 'DELETE'];

/** Tables of its own schema where a service may do less than read and write (written out here, not read from src). */
const OWN_EXCEPTIONS: Readonly<Record<string, readonly Privilege[]>> = {
  'audit.events': ['SELECT', 'INSERT'],
  'audit.chain_heads': ['SELECT', 'INSERT', 'UPDATE'],
  'audit.checkpoints': ['SELECT', 'INSERT'],
  'identity.signing_keys': ['SELECT'],
};

const schemaOf = (s: ServiceName) => s.replace(/-/g, '_');

/** A statement that needs `privilege` on `table` (whose first column is `column`) and changes nothing else. */
function probe(privilege: Privilege, table: string, column: string): string {
  switch (privilege) {
    case 'SELECT':
      return `SELECT 1 FROM ${table} LIMIT 1`;
    case 'INSERT':
      return `INSERT INTO ${table} DEFAULT VALUES`;
    case 'UPDATE':
      return `UPDATE ${table} SET ${column} = ${column} WHERE false`;
    case 'DELETE':
      return `DELETE FROM ${table} WHERE false`;
  }
}

/** A connection as one service's role, running each statement in a savepoint of a transaction that is never committed. */
class RoleSession {
  private constructor(private readonly client: pg.Client) {}

  static async open(mesh: Mesh, service: ServiceName): Promise<RoleSession> {
    // The role's password as the mesh made it: derived from the owner's (none under trust auth).
    const owner = mesh.env['DATABASE_URL']!;
    const ownerPassword = decodeURIComponent(new URL(owner).password);
    const role = databaseRole(service);
    const client = new pg.Client({
      connectionString: roleUrl(
        owner,
        role,
        ownerPassword ? derivedRolePassword(ownerPassword, role) : undefined,
      ),
    });
    await client.connect();
    await client.query('BEGIN');
    return new RoleSession(client);
  }

  /** 'ok', 'denied' (insufficient_privilege: permission denied, must be owner), or another SQLSTATE. */
  async attempt(statement: string): Promise<string> {
    await this.client.query('SAVEPOINT probe');
    try {
      await this.client.query(statement);
      return 'ok';
    } catch (err) {
      const code = (err as { code?: string }).code ?? 'error';
      return code === '42501' ? 'denied' : code;
    } finally {
      await this.client.query('ROLLBACK TO SAVEPOINT probe');
    }
  }

  async close(): Promise<void> {
    await this.client.query('ROLLBACK').catch(() => undefined);
    await this.client.end();
  }
}

describe('each service reaches only its own schema, as its own role', () => {
  let mesh: Mesh;
  /** Every table of the eight schemas with its first column (UPDATE probes set it to itself). */
  let tables: Array<{ service: ServiceName; table: string; column: string }>;

  beforeAll(async () => {
    mesh = await sharedMesh('default');
    const rows = await sqlOn<{ schema: string; name: string; column: string }>(
      mesh,
      `SELECT c.table_schema AS schema, c.table_name AS name, c.column_name AS column
         FROM information_schema.columns c
         JOIN information_schema.tables t USING (table_schema, table_name)
        WHERE c.table_schema = ANY($1) AND c.ordinal_position = 1 AND t.table_type = 'BASE TABLE'
        ORDER BY 1, 2`,
      [DATABASE_SERVICES.map(schemaOf)],
    );
    tables = rows.map((r) => ({
      service: DATABASE_SERVICES.find((s) => schemaOf(s) === r.schema)!,
      table: `${r.schema}."${r.name}"`,
      column: `"${r.column}"`,
    }));
  });

  it('finds the tables of every service (the matrix below is not empty)', () => {
    // Every schema holds at least its outbox and inbox besides drizzle's bookkeeping.
    for (const s of DATABASE_SERVICES)
      expect({ s, atLeast3: tables.filter((t) => t.service === s).length >= 3 }).toEqual({
        s,
        atLeast3: true,
      });
    expect(tables.map((t) => t.table)).toEqual(
      expect.arrayContaining(['audit."events"', 'identity."signing_keys"']),
    );
  });

  it('runs every service as its own role', async () => {
    // Each service's pool logs in as custos_<name>; none as the owner.
    const seen = new Map<string, Set<string>>();
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && seen.size < DATABASE_SERVICES.length) {
      const rows = await sqlOn<{ app: string; role: string }>(
        mesh,
        `SELECT application_name AS app, usename AS role FROM pg_stat_activity
          WHERE datname = current_database() AND application_name LIKE 'custos-%'`,
      );
      for (const r of rows) seen.set(r.app, (seen.get(r.app) ?? new Set()).add(r.role));
      await new Promise((r) => setTimeout(r, 500));
    }
    for (const s of DATABASE_SERVICES)
      expect({ service: s, roles: [...(seen.get(`custos-${s}`) ?? [])] }).toEqual({
        service: s,
        roles: [databaseRole(s)],
      });
  });

  // The matrix: for every service A and every table T of the eight schemas, what A's role may do.
  it.each(DATABASE_SERVICES.map((s) => [s]))(
    "%s's role reads and writes its own tables (as declared) and nothing of any other schema",
    async (service) => {
      const session = await RoleSession.open(mesh, service);
      const wrong: string[] = [];
      try {
        for (const t of tables) {
          const key = t.table.replace(/"/g, '');
          const allowed: readonly Privilege[] =
            t.service !== service || key.endsWith('.__drizzle_migrations') ? [] : (OWN_EXCEPTIONS[key] ?? RW);
          for (const p of RW) {
            const outcome = await session.attempt(probe(p, t.table, t.column));
            // Allowed: anything but a refusal (an INSERT of default values may break a constraint).
            const ok = allowed.includes(p) ? outcome !== 'denied' : outcome === 'denied';
            if (!ok)
              wrong.push(`${p} ${key}: ${outcome} (expected ${allowed.includes(p) ? 'allowed' : 'denied'})`);
          }
        }
      } finally {
        await session.close();
      }
      expect(wrong).toEqual([]);
    },
  );

  it.each(DATABASE_SERVICES.map((s) => [s]))(
    "%s's role cannot create anything, alter its tables or unguard the audit log",
    async (service) => {
      const session = await RoleSession.open(mesh, service);
      const own = tables.filter((t) => t.service === service);
      const outcomes: Record<string, string> = {};
      try {
        for (const schema of [...DATABASE_SERVICES.map(schemaOf), 'public'])
          outcomes[`create table in ${schema}`] = await session.attempt(
            `CREATE TABLE ${schema}.intruder (id int)`,
          );
        outcomes['create schema'] = await session.attempt('CREATE SCHEMA intruder');
        for (const t of own) {
          outcomes[`alter ${t.table}`] = await session.attempt(
            `ALTER TABLE ${t.table} ADD COLUMN intruder int`,
          );
          outcomes[`truncate ${t.table}`] = await session.attempt(`TRUNCATE ${t.table}`);
        }
        outcomes['alter audit.events'] = await session.attempt(
          'ALTER TABLE audit.events ADD COLUMN intruder int',
        );
        outcomes['disable the audit trigger'] = await session.attempt(
          'ALTER TABLE audit.events DISABLE TRIGGER events_append_only',
        );
        outcomes['disable every audit trigger'] = await session.attempt(
          'ALTER TABLE audit.events DISABLE TRIGGER ALL',
        );
        outcomes['drop the audit trigger'] = await session.attempt(
          'DROP TRIGGER events_append_only ON audit.events',
        );
        outcomes['skip triggers'] = await session.attempt('SET session_replication_role = replica');
        outcomes['update audit records'] = await session.attempt(`UPDATE audit.events SET action = action`);
        outcomes['delete audit records'] = await session.attempt('DELETE FROM audit.events');
        outcomes['insert a signing key'] = await session.attempt(
          `INSERT INTO identity.signing_keys SELECT * FROM identity.signing_keys LIMIT 1`,
        );
        outcomes['delete signing keys'] = await session.attempt('DELETE FROM identity.signing_keys');
        outcomes['become the owner'] = await session.attempt('SET ROLE postgres');
      } finally {
        await session.close();
      }
      const notDenied = Object.entries(outcomes).filter(([, o]) => o !== 'denied');
      expect(notDenied).toEqual([]);
    },
  );

  it("webhook-dispatcher's role cannot read identity's users, tokens or keys, nor call its key function", async () => {
    const session = await RoleSession.open(mesh, 'webhook-dispatcher');
    try {
      const identity = tables.filter((t) => t.service === 'identity');
      expect(identity.length).toBeGreaterThan(5);
      for (const t of identity)
        expect([t.table, await session.attempt(`SELECT * FROM ${t.table}`)]).toEqual([t.table, 'denied']);
      expect(
        await session.attempt(`SELECT identity.insert_signing_key('x', '{}'::jsonb, '\\x00'::bytea, now())`),
      ).toBe('denied');
      // Its own tables it reads: the refusal above is about identity, not a broken connection.
      expect(await session.attempt('SELECT 1 FROM webhook_dispatcher.webhooks LIMIT 1')).toBe('ok');
    } finally {
      await session.close();
    }
  });
});
