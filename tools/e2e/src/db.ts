import pg from 'pg';
import type { Mesh } from './mesh';

/**
 * Runs SQL against a mesh's database, for assertions on what is stored and for tamper tests that
 * change rows behind a service's back.
 */
export async function sqlOn<R extends pg.QueryResultRow = Record<string, unknown>>(
  mesh: Mesh,
  text: string,
  params: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: mesh.env['DATABASE_URL'] });
  await client.connect();
  try {
    return (await client.query<R>(text, params)).rows;
  } finally {
    await client.end();
  }
}
