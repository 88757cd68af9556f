import { createTestDatabase } from '@custos/service-kit/testing';
import pg from 'pg';
import { OutboxGroupCommit } from '../src';
import { DDL, SCHEMA } from './fixtures/schema';

describe('OutboxGroupCommit (group commit of outbox rows, real Postgres)', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: pg.Pool;
  const statements: string[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('custos_events_batch');
    pool = new pg.Pool({ connectionString: database.url, max: 4 });
    pool.on('error', () => undefined);
    await pool.query(DDL);
    // Count the INSERTs the batcher sends, to see that concurrent rows share one.
    const query = pool.query.bind(pool) as (...a: unknown[]) => unknown;
    (pool as unknown as { query: (...a: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const q = args[0] as { text?: string } | string;
      const text = typeof q === 'string' ? q : (q.text ?? '');
      if (text.startsWith('INSERT')) statements.push(text);
      return query(...args);
    };
  });

  afterAll(async () => {
    await pool.end();
    await database.drop();
  });

  beforeEach(async () => {
    statements.length = 0;
    await pool.query(`TRUNCATE ${SCHEMA}.outbox`);
  });

  const record = (i: number, org = '6f0c7e7a-4bd1-4a43-9a55-4a0f7f1b2c3d') => ({
    orgId: org,
    actorType: 'agent' as const,
    actorId: '0b8f58a6-3f5c-4f49-8d7a-8f7b1f6f7e10',
    action: 'secret.read',
    resourceType: 'secret',
    resourceId: null,
    metadata: { path: `p/${i}`, quote: `it's "quoted" \\ {x}` },
    clientIp: '203.0.113.7',
    requestId: `req-${i}`,
  });

  it('commits every row of concurrent callers, in fewer statements than rows, each resolved only once stored', async () => {
    const commits = new OutboxGroupCommit({ pool, schema: SCHEMA, maxInFlight: 1 });
    const ids = await Promise.all(Array.from({ length: 200 }, (_, i) => commits.audit(record(i))));
    expect(new Set(ids).size).toBe(200);
    const { rows } = await pool.query<{ id: string; payload: { metadata: { path: string; quote: string } } }>(
      `SELECT id, payload FROM ${SCHEMA}.outbox ORDER BY seq`,
    );
    expect(rows.map((r) => r.id).sort()).toEqual([...ids].sort());
    // Values that need quoting in an array literal survive as they were.
    expect(rows[0]!.payload.metadata.quote).toBe(`it's "quoted" \\ {x}`);
    expect(new Set(rows.map((r) => r.payload.metadata.path)).size).toBe(200);
    expect(statements.length).toBeGreaterThanOrEqual(1);
    expect(statements.length).toBeLessThan(200);
  });

  it('rejects every caller of a batch that could not be committed, and stores none of it', async () => {
    const failing = new OutboxGroupCommit({ pool, schema: 'no_such_schema', maxInFlight: 1 });
    const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => failing.audit(record(i))));
    expect(results.every((r) => r.status === 'rejected')).toBe(true);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.outbox`);
    expect(rows[0].n).toBe(0);
  });

  it('refuses a record that carries a secret-bearing key, without touching the others', async () => {
    const commits = new OutboxGroupCommit({ pool, schema: SCHEMA });
    const bad = { ...record(1), metadata: { value: 'canary-s3cr3t' } };
    const [good, refused] = await Promise.allSettled([
      commits.audit(record(0)),
      Promise.resolve().then(() => commits.audit(bad)),
    ]);
    expect(good.status).toBe('fulfilled');
    expect(refused.status).toBe('rejected');
    const { rows } = await pool.query(`SELECT payload::text AS p FROM ${SCHEMA}.outbox`);
    expect(rows).toHaveLength(1);
    expect(rows[0].p).not.toContain('canary-s3cr3t');
  });

  it('refuses a record with a NUL character (jsonb cannot hold it) alone, before it can fail a batch', async () => {
    const commits = new OutboxGroupCommit({ pool, schema: SCHEMA });
    const [good, refused] = await Promise.allSettled([
      commits.audit(record(0)),
      commits.audit({ ...record(1), metadata: { path: 'a\u0000b' } }),
    ]);
    expect(good.status).toBe('fulfilled');
    expect(refused.status).toBe('rejected');
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.outbox`);
    expect(rows[0].n).toBe(1);
  });

  it('refuses rows beyond its queue bound at once, and commits the ones it took', async () => {
    const commits = new OutboxGroupCommit({ pool, schema: SCHEMA, maxQueue: 5 });
    const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => commits.audit(record(i))));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(5);
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(refused).toHaveLength(15);
    expect(String(refused[0]!.reason)).toMatch(/rows waiting/);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.outbox`);
    expect(rows[0].n).toBe(5);
  });

  it('refuses an oversized event before it can fail a batch', async () => {
    const commits = new OutboxGroupCommit({ pool, schema: SCHEMA });
    await expect(
      commits.event({ name: 'audit.recorded', orgId: null, data: { big: 'x'.repeat(600 * 1024) } }),
    ).rejects.toThrow(/bytes; at most/);
  });
});
