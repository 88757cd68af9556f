import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { createDatabase, createLogger, createPool, migrateSchema, type Database } from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { sql } from 'drizzle-orm';
import { SCHEMA } from '../src/db/schema';
import { OrgKeyRing } from '../src/keys/org-key-ring';
import { LocalKms } from '../src/kms/local-kms';
import type { KmsProvider } from '../src/kms/kms-types';

const logger = createLogger({ service: 'vault-crypto-test', level: 'silent' });
const DAY = 86_400_000;

/** The local provider, counting how often the KMS is asked to unwrap. */
function countingKms(): KmsProvider & { unwraps: number } {
  const inner = new LocalKms(randomBytes(32));
  const kms = {
    name: 'local',
    unwraps: 0,
    wrapKey: (k: Buffer, c: string) => inner.wrapKey(k, c),
    unwrapKey: (w: Buffer, c: string) => {
      kms.unwraps += 1;
      return inner.unwrapKey(w, c);
    },
  };
  return kms;
}

describe('org key-encryption keys in Postgres', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let db: Database;

  beforeAll(async () => {
    database = await createTestDatabase('custos_vault_keys');
    pool = createPool(database.url, 8, logger, 'keys-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    db = createDatabase(pool);
  });
  afterAll(async () => {
    await pool.end();
    await database.drop();
  });

  const versionsOf = async (orgId: string) =>
    (
      await db.execute<{ version: number; provider: string; wrapped_key: Buffer }>(
        sql`SELECT version, provider, wrapped_key FROM vault_crypto.org_keys WHERE org_id = ${orgId} ORDER BY version`,
      )
    ).rows;

  it('creates one first version however many writers race, stored only wrapped', async () => {
    const kms = countingKms();
    const rings = Array.from(
      { length: 4 },
      () => new OrgKeyRing(db, kms, { rotationMs: DAY, cacheTtlMs: 60_000, cacheSize: 10 }, logger),
    );
    const orgId = randomUUID();
    const keys = await Promise.all(Array.from({ length: 20 }, (_, i) => rings[i % 4]!.active(orgId)));
    expect(new Set(keys.map((k) => k.version))).toEqual(new Set([1]));
    expect(new Set(keys.map((k) => k.key.toString('hex'))).size).toBe(1);
    const rows = await versionsOf(orgId);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.provider).toBe('local');
    expect(rows[0]!.wrapped_key.includes(keys[0]!.key)).toBe(false);
  });

  it('caches unwrapped keys, asking the KMS once per version until the entry expires', async () => {
    const kms = countingKms();
    let now = Date.now();
    const ring = new OrgKeyRing(
      db,
      kms,
      { rotationMs: DAY, cacheTtlMs: 1000, cacheSize: 10, now: () => now },
      logger,
    );
    const orgId = randomUUID();
    await ring.active(orgId);
    expect(kms.unwraps).toBe(1);
    for (let i = 0; i < 10; i += 1) await ring.key(orgId, 1);
    expect(kms.unwraps).toBe(1);
    now += 1500;
    await ring.key(orgId, 1);
    expect(kms.unwraps).toBe(2);
  });

  it('rotates after the rotation period and on demand, keeping every old version readable', async () => {
    const kms = countingKms();
    let now = Date.now();
    const ring = new OrgKeyRing(
      db,
      kms,
      { rotationMs: 10_000, cacheTtlMs: 0, cacheSize: 0, now: () => now },
      logger,
    );
    const orgId = randomUUID();
    const v1 = await ring.active(orgId);
    const v1Hex = v1.key.toString('hex');
    expect(v1.version).toBe(1);
    // The period is measured from the row's creation time in Postgres: move the clock past it.
    now += 10_000 + 5_000;
    expect((await ring.active(orgId)).version).toBe(2);
    expect(await ring.rotate(orgId)).toBe(3);
    expect((await ring.active(orgId)).version).toBe(3);
    expect((await ring.key(orgId, 1)).toString('hex')).toBe(v1Hex);
    expect((await versionsOf(orgId)).map((r) => r.version)).toEqual([1, 2, 3]);
  });

  it('cannot unwrap a KEK row moved to another org', async () => {
    const kms = countingKms();
    const ring = new OrgKeyRing(db, kms, { rotationMs: DAY, cacheTtlMs: 0, cacheSize: 0 }, logger);
    const a = randomUUID();
    const b = randomUUID();
    await ring.active(a);
    await db.execute(
      sql`INSERT INTO vault_crypto.org_keys (org_id, version, wrapped_key, provider)
          SELECT ${b}, version, wrapped_key, provider FROM vault_crypto.org_keys WHERE org_id = ${a}`,
    );
    await expect(ring.key(b, 1)).rejects.toThrow();
  });
});
