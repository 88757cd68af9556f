import path from 'node:path';
import { createCipheriv, randomBytes } from 'node:crypto';
import { createDatabase, createLogger, createPool, migrateSchema, type Database } from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { sql } from 'drizzle-orm';
import { SCHEMA } from '../src/db/schema';
import { openTotpSecret } from '../src/mfa/mfa-fns';
import { MfaService } from '../src/mfa/mfa-service';
import { MfaStore } from '../src/mfa/mfa-store';

const logger = createLogger({ service: 'identity-test', level: 'silent' });

/** A secret as identity sealed it before MFA_SECRET_KEY: format 1, under the token-signing KEK. */
function legacySeal(secret: Buffer, kek: Buffer, userId: string): Buffer {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', kek, iv);
  c.setAAD(Buffer.from(`custos-totp-secret:${userId}`, 'utf8'));
  const ct = Buffer.concat([c.update(secret), c.final()]);
  return Buffer.concat([Buffer.from([1]), iv, c.getAuthTag(), ct]);
}

describe('TOTP secrets move from the token-signing KEK to MFA_SECRET_KEY at start', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let db: Database;

  beforeAll(async () => {
    database = await createTestDatabase('custos_identity_mfa');
    pool = createPool(database.url, 2, logger, 'mfa-reseal-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    db = createDatabase(pool);
  });
  afterAll(async () => {
    await pool.end();
    await database.drop();
  });

  it('re-seals enabled and pending secrets, leaves current ones, and counts one that does not open', async () => {
    const tokenKek = randomBytes(32);
    const mfaKey = randomBytes(32);
    const org = (
      await db.execute<{ id: string }>(sql`INSERT INTO identity.orgs (name) VALUES ('o') RETURNING id`)
    ).rows[0]!.id;
    const user = async (email: string) =>
      (
        await db.execute<{ id: string }>(
          sql`INSERT INTO identity.users (email, org_id) VALUES (${email}, ${org}) RETURNING id`,
        )
      ).rows[0]!.id;
    const [a, b, c] = [await user('a@x.test'), await user('b@x.test'), await user('c@x.test')];
    const secretA = randomBytes(20);
    const pendingB = randomBytes(20);
    await db.execute(
      sql`UPDATE identity.users SET totp_enabled = true, totp_secret_enc = ${legacySeal(secretA, tokenKek, a)} WHERE id = ${a}`,
    );
    await db.execute(
      sql`UPDATE identity.users SET totp_pending_secret_enc = ${legacySeal(pendingB, tokenKek, b)} WHERE id = ${b}`,
    );
    // Sealed under some other key: it cannot be moved, and is left as it is.
    const lost = legacySeal(randomBytes(20), randomBytes(32), c);
    await db.execute(sql`UPDATE identity.users SET totp_secret_enc = ${lost} WHERE id = ${c}`);

    const mfa = new MfaService(
      new MfaStore(db),
      { startSession: async () => ({}) } as never,
      { kek: mfaKey },
      { confirmStepUp: () => Promise.reject(new Error('resealing checks no step-up')) },
    );
    expect(await mfa.resealLegacy(tokenKek)).toEqual({ resealed: 2, unreadable: 1 });

    const rows = await db.execute<{ id: string; s: Buffer | null; p: Buffer | null }>(
      sql`SELECT id, totp_secret_enc AS s, totp_pending_secret_enc AS p FROM identity.users`,
    );
    const byId = new Map(rows.rows.map((r) => [r.id, r]));
    expect(openTotpSecret(byId.get(a)!.s!, mfaKey, a).equals(secretA)).toBe(true);
    expect(openTotpSecret(byId.get(b)!.p!, mfaKey, b).equals(pendingB)).toBe(true);
    expect(byId.get(c)!.s!.equals(lost)).toBe(true);
    // A second start finds nothing new to move (the unreadable one is counted again, not changed).
    expect(await mfa.resealLegacy(tokenKek)).toEqual({ resealed: 0, unreadable: 1 });
  });
});
