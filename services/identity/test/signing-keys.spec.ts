import path from 'node:path';
import { type KeyObject, createPrivateKey, randomBytes, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { TokenVerifier, redisRevocationCheck } from '@custos/auth';
import { createDatabase, createLogger, createPool, migrateSchema, type Database } from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { sql } from 'drizzle-orm';
import { SCHEMA } from '../src/db/schema';
import { localKeySource } from '../src/tokens/local-keys';
import { retireCompromisedKey } from '../src/tokens/retire-key-fns';
import { generateSigningKey, sealPrivateKey, signJwt } from '../src/tokens/signing-key-fns';
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

  it('replaces an active key that the configured KEK cannot open, and no longer trusts it', async () => {
    const before = ring(3_600_000);
    await before.refresh();
    const lost = before.active().kid;
    const replaced = ring(3_600_000, randomBytes(32));
    await replaced.refresh();
    expect(replaced.active().kid).not.toBe(lost);
    // Without the KEK nothing proves the row is identity's own: it is neither used nor published.
    expect(replaced.jwks().keys.map((k) => k.kid)).not.toContain(lost);
  });
});

describe('token signing keys: only keys that open under the KEK are trusted', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let db: Database;
  const kek = randomBytes(32);
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: true });

  beforeAll(async () => {
    database = await createTestDatabase('custos_identity_keys');
    pool = createPool(database.url, 4, logger, 'keys-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    db = createDatabase(pool);
    await redis.connect();
  });
  afterAll(async () => {
    redis.disconnect();
    await pool.end();
    await database.drop();
  });

  const newRing = () =>
    new SigningKeyRing(db, { kek, rotationMs: 3_600_000, retiredKeyTtlMs: 86_400_000 }, logger);
  const verifierFor = (r: SigningKeyRing) =>
    new TokenVerifier({
      keys: localKeySource(r),
      issuers: settings.issuers,
      audience: settings.audience,
      cacheSize: 0,
      isRevoked: redisRevocationCheck(redis),
    });
  /** A token for `user` signed by `key` under `kid`, with the claims identity would put in it. */
  const forge = (key: KeyObject, kid: string) => {
    const now = Math.floor(Date.now() / 1000);
    return signJwt(
      {
        iss: settings.issuers[0],
        aud: settings.audience,
        sub: `user:${user.id}`,
        org: user.orgId,
        role: 'owner',
        typ: 'user',
        sid: 'forged',
        amr: ['pwd'],
        jti: randomUUID(),
        iat: now,
        exp: now + 600,
      },
      key,
      kid,
    );
  };

  it('ignores a hand-inserted row (a key sealed without the KEK) and refuses tokens it signed', async () => {
    const r = newRing();
    await r.refresh();
    const genuine = new TokenIssuer(r, settings).userAccessToken(user, { id: 's1', amr: ['pwd'] }).token;
    await expect(verifierFor(r).verify(genuine)).resolves.toMatchObject({ userId: user.id });

    // What a service holding the database but not the KEK could write: a fresh key pair, a correct
    // public JWK and thumbprint kid, sealed under a key of its own choosing — and marked retired, so
    // that identity would not even try to sign with it.
    const attacker = generateSigningKey();
    const attackerKey = createPrivateKey({ key: attacker.privateKeyDer, format: 'der', type: 'pkcs8' });
    await db.execute(
      sql`INSERT INTO identity.signing_keys (kid, public_jwk, private_key_enc, retired_at)
          VALUES (${attacker.kid}, ${JSON.stringify(attacker.publicJwk)}::jsonb,
                  ${sealPrivateKey(attacker.privateKeyDer, randomBytes(32), attacker.kid)}, now())`,
    );
    await r.refresh();
    expect(r.jwks().keys.map((k) => k.kid)).not.toContain(attacker.kid);
    expect(r.jwks().keys.map((k) => k.kid)).toContain(r.active().kid);
    await expect(verifierFor(r).verify(forge(attackerKey, attacker.kid))).rejects.toMatchObject({
      reason: 'unknown_kid',
    });
    // A replica starting afresh does not trust it either, and genuine tokens keep working.
    const fresh = newRing();
    await fresh.refresh();
    expect(fresh.jwks().keys.map((k) => k.kid)).not.toContain(attacker.kid);
    await expect(verifierFor(fresh).verify(genuine)).resolves.toBeDefined();
  });

  it('refuses a genuine row whose public key was swapped for another', async () => {
    const r = newRing();
    await r.refresh();
    const kid = r.active().kid;
    const attacker = generateSigningKey();
    const attackerKey = createPrivateKey({ key: attacker.privateKeyDer, format: 'der', type: 'pkcs8' });
    await db.execute(
      sql`UPDATE identity.signing_keys SET public_jwk = ${JSON.stringify({ ...attacker.publicJwk, kid })}::jsonb WHERE kid = ${kid}`,
    );
    const fresh = newRing();
    await fresh.refresh();
    expect(fresh.jwks().keys.map((k) => k.x)).not.toContain(attacker.publicJwk.x);
    expect(fresh.active().kid).not.toBe(kid);
    await expect(verifierFor(fresh).verify(forge(attackerKey, kid))).rejects.toMatchObject({
      reason: 'unknown_kid',
    });
  });

  it('the key-insert function refuses rows that do not look like a sealed Ed25519 key', async () => {
    const k = generateSigningKey();
    const refusal = (p: Promise<unknown>) =>
      p.then(
        () => 'accepted',
        (e: { cause?: { message?: string }; message: string }) => e.cause?.message ?? e.message,
      );
    expect(
      await refusal(
        db.execute(
          sql`SELECT identity.insert_signing_key(${k.kid}, ${JSON.stringify(k.publicJwk)}::jsonb, ${Buffer.alloc(10)}, now())`,
        ),
      ),
    ).toMatch(/not a sealed Ed25519 key/);
    expect(
      await refusal(
        db.execute(
          sql`SELECT identity.insert_signing_key(${'x'.repeat(43)}, ${JSON.stringify(k.publicJwk)}::jsonb, ${sealPrivateKey(k.privateKeyDer, kek, k.kid)}, now())`,
        ),
      ),
    ).toMatch(/with this kid/);
  });

  it('the prune function never drops a key retired less than a day ago, whatever it is asked', async () => {
    const before = await db.execute(sql`SELECT count(*)::int AS n FROM identity.signing_keys`);
    await db.execute(
      sql`UPDATE identity.signing_keys SET retired_at = now() - interval '2 hours' WHERE retired_at IS NOT NULL`,
    );
    const pruned = await db.execute(sql`SELECT identity.prune_signing_keys(interval '0 seconds') AS n`);
    expect(pruned.rows).toEqual([{ n: 0 }]);
    await db.execute(
      sql`UPDATE identity.signing_keys SET retired_at = now() - interval '25 hours' WHERE retired_at IS NOT NULL`,
    );
    const old = await db.execute(sql`SELECT identity.prune_signing_keys(interval '0 seconds') AS n`);
    const after = await db.execute(sql`SELECT count(*)::int AS n FROM identity.signing_keys`);
    expect((old.rows[0] as { n: number }).n).toBeGreaterThan(0);
    expect((after.rows[0] as { n: number }).n).toBe(
      (before.rows[0] as { n: number }).n - (old.rows[0] as { n: number }).n,
    );
  });

  it('retire-key refuses the kid’s tokens at once, everywhere, and the ring moves to a new key', async () => {
    const r = newRing();
    await r.refresh();
    const kid = r.active().kid;
    const token = new TokenIssuer(r, settings).userAccessToken(user, { id: 's9', amr: ['pwd'] }).token;
    await expect(verifierFor(r).verify(token)).resolves.toBeDefined();

    expect(await retireCompromisedKey(db, redis, logger, kid)).toBe(true);
    // Before any refresh: the Redis revocation alone refuses it.
    await expect(verifierFor(r).verify(token)).rejects.toMatchObject({ reason: 'revoked' });
    await r.refresh();
    expect(r.active().kid).not.toBe(kid);
    expect(r.jwks().keys.map((k) => k.kid)).not.toContain(kid);
    const rows = await db.execute(sql`SELECT kind FROM identity.revocations WHERE value = ${kid}`);
    expect(rows.rows).toEqual([{ kind: 'kid' }]);
    expect(await retireCompromisedKey(db, redis, logger, 'no-such-kid')).toBe(false);
    // The retire/revoke functions use the server's clock and never un-revoke.
    await db.execute(sql`SELECT identity.revoke_signing_key(${kid})`);
    const row = await db.execute(
      sql`SELECT revoked_at IS NOT NULL AS revoked FROM identity.signing_keys WHERE kid = ${kid}`,
    );
    expect(row.rows).toEqual([{ revoked: true }]);
  });
});
