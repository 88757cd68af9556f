import { sql } from 'drizzle-orm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import { describeError, type Logger } from './logger.js';

/** A Drizzle database bound to a pool. */
export type Database = NodePgDatabase<Record<string, never>>;

/**
 * Opens a pool to `url`; idle-client errors are logged, never thrown. With `sessionRole`, every
 * connection runs as that role from its startup packet (`-c role=…`), so the pool has only the
 * role's privileges, and a missing role fails the connection instead of running unrestricted.
 */
export function createPool(
  url: string,
  max: number,
  logger: Logger,
  applicationName: string,
  sessionRole?: string,
): pg.Pool {
  if (sessionRole !== undefined && !/^[a-z_][a-z0-9_]*$/.test(sessionRole))
    throw new Error(`session role "${sessionRole}" is not a plain lower-case identifier`);
  const pool = new pg.Pool({
    connectionString: url,
    max,
    application_name: applicationName,
    keepAlive: true,
    ...(sessionRole ? { options: `-c role=${sessionRole}` } : {}),
  });
  pool.on('error', (err) => logger.warn({ err: describeError(err) }, 'idle Postgres client failed'));
  return pool;
}

/** Wraps a pool in Drizzle. */
export function createDatabase(pool: pg.Pool): Database {
  return drizzle(pool);
}

/**
 * Applies a service's migrations, recording them in its own schema. An advisory lock keyed by the
 * schema name makes concurrent replicas (or a migration Job racing a pod) apply them once.
 */
export async function migrateSchema(
  pool: pg.Pool,
  opts: { schema: string; migrationsFolder: string },
): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [`custos.migrate.${opts.schema}`]);
    try {
      await migrate(drizzle(client), {
        migrationsFolder: opts.migrationsFolder,
        migrationsSchema: opts.schema,
        migrationsTable: '__drizzle_migrations',
      });
    } finally {
      await client.query('SELECT pg_advisory_unlock(hashtext($1))', [`custos.migrate.${opts.schema}`]);
    }
  } finally {
    client.release();
  }
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
