import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { TokenVerifier } from '@custos/auth';
import { createDatabase, createLogger, createPool, migrateSchema, type Database } from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { sql } from 'drizzle-orm';
import { SCHEMA } from '../src/db/schema';
import { localKeySource } from '../src/tokens/local-keys';
import { SigningKeyRing } from '../src/tokens/signing-key-store';
import { TokenIssuer } from '../src/tokens/token-issuer';

const logger = createLogger({ service: 'identity-test', level: 'silent' });
const settings = { issuers: ['http://custos.test'], audience: 'custos-api', userAccessTtlSeconds: 900 };
const user = {
  id: '11111111-1111-4111-8111-111111111111',
  orgId: '22222222-2222-4222-8222-222222222222',
  role: 'owner',
};

describe('token signing keys: rotation without logging anyone out', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let db: Database;
  const kek = randomBytes(32);

  beforeAll(async () => {
    database = await createTestDatabase('custos_identity_keys');
    pool = createPool(database.url, 4, logger, 'keys-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    db = createDatabase(pool);
  });
  afterAll(async () => {
    await pool.end();
    await database.drop();
  });

  const ring = (rotationMs: number, key = kek) =>
    new SigningKeyRing(db, { kek: key, rotationMs, retiredKeyTtlMs: 86_400_000 }, logger);
  const verifierFor = (r: SigningKeyRing) =>
    new TokenVerifier({
      keys: localKeySource(r),
      issuers: settings.issuers,
      audience: settings.audience,
      cacheSize: 0,
    });

  it('creates one key for all replicas, stores the private half encrypted, and rotates when due', async () => {
    const a = ring(60_000);
    const b = ring(60_000);
    await Promise.all([a.refresh(), b.refresh()]);
    expect(a.active().kid).toBe(b.active().kid);
    const rows = await db.execute(sql`SELECT kid, private_key_enc FROM identity.signing_keys`);
    expect(rows.rows).toHaveLength(1);
    // PKCS#8 Ed25519 private keys start with this DER prefix; the stored bytes must not.
    expect(
      (rows.rows[0] as { private_key_enc: Buffer }).private_key_enc.includes(
        Buffer.from('302e020100300506032b6570', 'hex'),
      ),
    ).toBe(false);

    const oldToken = new TokenIssuer(a, settings).userAccessToken(user, { id: 's1', amr: ['pwd'] }).token;
    const oldKid = a.active().kid;
    await a.refresh(new Date(Date.now() + 61_000)); // past the rotation period
    expect(a.active().kid).not.toBe(oldKid);
    expect(a.jwks().keys.map((k) => k.kid)).toEqual(expect.arrayContaining([oldKid, a.active().kid]));

    // Tokens signed before the rotation still verify; new ones use the new key.
    await expect(verifierFor(a).verify(oldToken)).resolves.toMatchObject({ userId: user.id });
    const newToken = new TokenIssuer(a, settings).userAccessToken(user, { id: 's2', amr: ['pwd'] }).token;
    const header = JSON.parse(Buffer.from(newToken.split('.')[0]!, 'base64url').toString()) as {
      kid: string;
    };
    expect(header.kid).toBe(a.active().kid);
    await expect(verifierFor(a).verify(newToken)).resolves.toMatchObject({ userId: user.id });

    // The other replica picks the new key up at its next refresh and verifies both.
    await b.refresh();
    expect(b.active().kid).toBe(a.active().kid);
    await expect(verifierFor(b).verify(oldToken)).resolves.toBeDefined();
  });

  it('drops a retired key from the JWKS once its tokens can no longer be alive', async () => {
    const r = ring(60_000);
    await r.refresh();
    const retired = r.jwks().keys.find((k) => k.kid !== r.active().kid);
    expect(retired).toBeDefined();
    await r.refresh(new Date(Date.now() + 86_400_000 + 120_000));
    expect(r.jwks().keys.map((k) => k.kid)).not.toContain(retired!.kid);
  });

  it('replaces an active key that the configured KEK cannot open instead of failing to start', async () => {
    const before = ring(3_600_000);
    await before.refresh();
    const lost = before.active().kid;
    const replaced = ring(3_600_000, randomBytes(32));
    await replaced.refresh();
    expect(replaced.active().kid).not.toBe(lost);
    expect(replaced.jwks().keys.map((k) => k.kid)).toContain(lost);
  });
});
