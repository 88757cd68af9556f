import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { createDatabase, createLogger, createPool, migrateSchema, type Database } from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { sql } from 'drizzle-orm';
import { AccountStore } from '../src/account/account-store';
import { SCHEMA } from '../src/db/schema';
import { PersonalKeyStore } from '../src/keys/personal-key-store';
import { UserStore } from '../src/users/user-store';

const logger = createLogger({ service: 'identity-test', level: 'silent' });

// A key exchange touches its key in the sign-in's transaction only while the key is live at the
// database, so an exchange that read the key before a password reset cannot sign in after it.
describe('personal API key touch against Postgres (the reset race)', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let db: Database;
  let users: UserStore;
  let keys: PersonalKeyStore;
  let accounts: AccountStore;

  beforeAll(async () => {
    database = await createTestDatabase('custos_identity_key_touch');
    pool = createPool(database.url, 8, logger, 'identity-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    db = createDatabase(pool);
    users = new UserStore(db);
    keys = new PersonalKeyStore(db);
    accounts = new AccountStore(db);
  });

  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  async function keyOf(expiresAt: Date | null = null) {
    const u = await users.createUserWithOrg({
      email: `k-${randomUUID()}@example.com`,
      displayName: '',
      passwordHash: 'x',
      orgName: 'org',
      emailVerified: true,
    });
    const key = await keys.insert({
      tokenId: randomUUID(),
      userId: u!.id,
      name: 'ci',
      secretHash: 'h',
      expiresAt,
    });
    return { userId: u!.id, key };
  }
  const lastUsed = async (id: string) => (await keys.findByTokenId(id))?.lastUsedAt ?? null;

  it('touches a live key, and not a revoked or expired one', async () => {
    const live = await keyOf();
    expect(await keys.touch(live.key.id)).toBe(true);
    expect(await lastUsed(live.key.tokenId)).toBeInstanceOf(Date);

    const revoked = await keyOf();
    await accounts.revokePersonalApiKeys(revoked.userId);
    expect(await keys.touch(revoked.key.id)).toBe(false);
    expect(await lastUsed(revoked.key.tokenId)).toBeNull();

    const expired = await keyOf(new Date(Date.now() + 60_000));
    await db.execute(
      sql`UPDATE identity.personal_api_keys SET expires_at = now() - interval '1 second' WHERE id = ${expired.key.id}`,
    );
    expect(await keys.touch(expired.key.id)).toBe(false);
  });

  it('an exchange racing a reset waits for its revocation and then fails', async () => {
    const { userId, key } = await keyOf();
    // The exchange has read the key (live) before the reset; the reset's transaction now holds it.
    expect((await keys.findByTokenId(key.tokenId))?.revokedAt).toBeNull();
    let releaseReset!: () => void;
    const resetHolds = new Promise<void>((r) => (releaseReset = r));
    let revokedInReset!: () => void;
    const revokedYet = new Promise<void>((r) => (revokedInReset = r));
    const reset = db.transaction(async (tx) => {
      expect(await accounts.revokePersonalApiKeys(userId, tx)).toBe(1);
      revokedInReset();
      await resetHolds;
    });
    await revokedYet;
    let touched: boolean | undefined;
    const exchange = db.transaction((tx) => keys.touch(key.id, tx)).then((t) => (touched = t));
    // The touch blocks on the reset's row lock instead of reading the old, live row.
    await new Promise((r) => setTimeout(r, 300));
    expect(touched).toBeUndefined();
    releaseReset();
    await reset;
    await exchange;
    expect(touched).toBe(false);
    expect(await lastUsed(key.tokenId)).toBeNull();
  });
});
