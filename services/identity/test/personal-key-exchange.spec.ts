import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  CustosError,
  ERROR_KINDS,
  type Database,
  createDatabase,
  createLogger,
  createPool,
  migrateSchema,
} from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { Redis } from 'ioredis';
import { AccountStore } from '../src/account/account-store';
import { SECRET_TOKEN_PREFIXES, generateSecretToken } from '../src/credentials/secret-token-fns';
import { WrongSecretBucket } from '../src/credentials/wrong-secret-bucket';
import { SCHEMA } from '../src/db/schema';
import { PersonalKeyService } from '../src/keys/personal-key-service';
import { PersonalKeyStore } from '../src/keys/personal-key-store';
import { RevocationStore } from '../src/tokens/revocation-store';
import { SigningKeyRing } from '../src/tokens/signing-key-store';
import { TokenIssuer } from '../src/tokens/token-issuer';
import { UserStore } from '../src/users/user-store';

const logger = createLogger({ service: 'identity-test', level: 'silent' });
const WRONG_PER_MINUTE = 2;

// The personal API key exchange (`csk_` → user token) against real Postgres and Redis: a flood of
// wrong secrets is audited a bounded number of times, and an exchange racing a password reset's
// revocation of the key is refused.
describe('personal API key exchange (Postgres, Redis)', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let db: Database;
  let redis: Redis;
  let users: UserStore;
  let keys: PersonalKeyStore;
  let accounts: AccountStore;
  let service: PersonalKeyService;

  beforeAll(async () => {
    database = await createTestDatabase('custos_identity_key_exchange');
    pool = createPool(database.url, 8, logger, 'identity-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    db = createDatabase(pool);
    redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
    users = new UserStore(db);
    keys = new PersonalKeyStore(db);
    accounts = new AccountStore(db);
    const ring = new SigningKeyRing(
      db,
      { kek: randomBytes(32), rotationMs: 60_000, retiredKeyTtlMs: 86_400_000 },
      logger,
    );
    await ring.refresh();
    service = new PersonalKeyService(
      keys,
      users,
      new TokenIssuer(ring, {
        issuers: ['http://custos.test'],
        audience: 'custos-api',
        userAccessTtlSeconds: 900,
      }),
      new RevocationStore(db, redis, logger),
      // Key creation's step-up; an exchange never asks for one.
      {
        confirmStepUp: () => Promise.reject(new Error('an exchange asks for no step-up')),
      },
      new WrongSecretBucket(redis, WRONG_PER_MINUTE, logger),
    );
  });
  afterAll(async () => {
    redis?.disconnect();
    await pool?.end();
    await database?.drop();
  });

  async function userWithKey() {
    const u = await users.createUserWithOrg({
      email: `x-${randomUUID()}@example.com`,
      displayName: '',
      passwordHash: 'x',
      orgName: 'org',
      emailVerified: true,
    });
    const t = generateSecretToken(SECRET_TOKEN_PREFIXES.personalApiKey);
    const key = await keys.insert({
      tokenId: t.id,
      userId: u!.id,
      name: 'ci',
      secretHash: t.secretHash,
      expiresAt: null,
    });
    return { user: u!, key, apiKey: t.token };
  }

  const outcome = (p: Promise<unknown>) =>
    p.then(
      () => 200,
      (err: unknown) => (err instanceof CustosError ? ERROR_KINDS[err.kind].http : String(err)),
    );

  async function records(orgId: string) {
    const { rows } = await pool.query(
      `SELECT payload->>'action' AS action, payload->'metadata' AS metadata
         FROM identity.outbox WHERE name = 'audit.recorded' AND org_id = $1 ORDER BY seq`,
      [orgId],
    );
    return rows as Array<{ action: string; metadata: Record<string, unknown> }>;
  }

  it('audits WRONG_PER_MINUTE wrong secrets per key, then answers 429 under one limited record', async () => {
    const { user, key, apiKey } = await userWithKey();
    const wrong = `${apiKey.slice(0, -4)}${apiKey.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
    const answers = await Promise.all(Array.from({ length: 12 }, () => outcome(service.exchange(wrong))));
    expect(answers.filter((a) => a === 401)).toHaveLength(WRONG_PER_MINUTE);
    expect(answers.filter((a) => a === 429)).toHaveLength(12 - WRONG_PER_MINUTE);
    const audited = await records(user.orgId);
    expect(audited.filter((r) => r.action === 'auth.login_failed')).toHaveLength(WRONG_PER_MINUTE);
    expect(audited.filter((r) => r.action === 'auth.exchange_refusals_limited')).toEqual([
      {
        action: 'auth.exchange_refusals_limited',
        metadata: { method: 'api_key', key_id: key.id, per_minute: 2 },
      },
    ]);
    // The right key still signs in.
    expect(await outcome(service.exchange(apiKey))).toBe(200);
  });

  it('refuses an exchange whose key a reset revokes while it runs, with an audited key_revoked', async () => {
    const { user, key, apiKey } = await userWithKey();
    let release!: () => void;
    const hold = new Promise<void>((r) => (release = r));
    let revoked!: () => void;
    const revokedYet = new Promise<void>((r) => (revoked = r));
    const reset = db.transaction(async (tx) => {
      await accounts.revokePersonalApiKeys(user.id, tx);
      revoked();
      await hold;
    });
    await revokedYet;
    // The exchange reads the key (still live: the reset has not committed) and waits at its touch.
    const exchanged = outcome(service.exchange(apiKey));
    await new Promise((r) => setTimeout(r, 300));
    release();
    await reset;
    expect(await exchanged).toBe(401);
    const audited = await records(user.orgId);
    expect(audited.filter((r) => r.action === 'auth.login')).toEqual([]);
    expect(audited.filter((r) => r.action === 'auth.login_failed')).toEqual([
      { action: 'auth.login_failed', metadata: { method: 'api_key', key_id: key.id, reason: 'key_revoked' } },
    ]);
    expect((await keys.findByTokenId(key.tokenId))?.lastUsedAt).toBeNull();
  });
});
