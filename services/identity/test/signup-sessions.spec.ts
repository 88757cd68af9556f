import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { hash } from '@node-rs/argon2';
import {
  CustosError,
  type Database,
  createDatabase,
  createLogger,
  createPool,
  migrateSchema,
} from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { Redis } from 'ioredis';
import type { UserPrincipal } from '@custos/auth';
import { AccountStore } from '../src/account/account-store';
import { ReauthService } from '../src/account/reauth-service';
import { ARGON2_PARAMS, hashPassword, verifyPassword } from '../src/credentials/password-fns';
import { SCHEMA } from '../src/db/schema';
import { MfaChallengeIssuer } from '../src/mfa/mfa-challenges';
import { MfaStore } from '../src/mfa/mfa-store';
import { TotpStepUpCodes } from '../src/mfa/totp-step-up';
import { Notifier } from '../src/notifications/notifier';
import { RevocationStore } from '../src/tokens/revocation-store';
import { SigningKeyRing } from '../src/tokens/signing-key-store';
import { TokenIssuer } from '../src/tokens/token-issuer';
import { AccountGate } from '../src/users/account-gate';
import { SessionService } from '../src/users/session-service';
import { SignupService } from '../src/users/signup-service';
import type { SignupMode } from '../src/users/signup-mode-fns';
import { UserStore } from '../src/users/user-store';

// SIGNUP_MODE and the install's first account, the absolute lifetime of a session, and the
// argon2id rehash at sign-in, against Postgres (and Redis for revocations).

const logger = createLogger({ service: 'identity-test', level: 'silent' });
const PASSWORD = 'Correct-Horse-9-battery';
const FAMILY_TTL_SECONDS = 7200;
const settings = { issuers: ['http://custos.test'], audience: 'custos-api', userAccessTtlSeconds: 900 };

function claimsOf(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as Record<
    string,
    unknown
  >;
}

async function refusalOf(p: Promise<unknown>) {
  try {
    await p;
  } catch (err) {
    if (err instanceof CustosError) return { kind: err.kind, type: err.type, detail: err.message };
    throw err;
  }
  throw new Error('expected a refusal');
}

/** A fresh, migrated database with the services of signup and sessions over it. */
async function install(name: string, redis: Redis) {
  const database = await createTestDatabase(name);
  const pool = createPool(database.url, 10, logger, 'identity-test');
  await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
  const db: Database = createDatabase(pool);
  const ring = new SigningKeyRing(
    db,
    { kek: randomBytes(32), rotationMs: 60_000, retiredKeyTtlMs: 86_400_000 },
    logger,
  );
  await ring.refresh();
  const users = new UserStore(db);
  const sessions = new SessionService(
    users,
    new TokenIssuer(ring, settings),
    new RevocationStore(db, redis, logger),
    new MfaChallengeIssuer(new MfaStore(db)),
    { refreshTtlSeconds: 86_400, familyTtlSeconds: FAMILY_TTL_SECONDS },
    logger,
  );
  const signupsIn = (mode: SignupMode, adminEmailsConfigured = false) =>
    new SignupService(
      users,
      sessions,
      new Notifier({ send: async () => undefined }, 'http://127.0.0.1:8080'),
      { verificationTtlSeconds: 3600, requireEmailVerification: false },
      logger,
      new AccountGate(users, { mode, adminEmailsConfigured }),
    );
  const count = async (table: string) => {
    const r = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM identity.${table}`);
    return Number(r.rows[0]!.n);
  };
  const reauth = new ReauthService(
    new AccountStore(db),
    users,
    logger,
    new TotpStepUpCodes(new MfaStore(db), randomBytes(32)),
  );
  return {
    pool,
    db,
    users,
    sessions,
    reauth,
    signupsIn,
    count,
    async close() {
      await pool.end();
      await database.drop();
    },
  };
}

describe('signup modes, session lifetime and password rehash against Postgres', () => {
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
  afterAll(() => redis.disconnect());

  describe('invite mode (the default) on a fresh install', () => {
    let i: Awaited<ReturnType<typeof install>>;
    beforeAll(async () => {
      i = await install('custos_identity_signup_invite', redis);
    });
    afterAll(() => i?.close());

    it('of parallel first signups exactly one is admitted and becomes platform admin; later ones are refused', async () => {
      const signups = i.signupsIn('invite');
      const results = await Promise.allSettled(
        Array.from({ length: 6 }, (_, n) =>
          signups.signup({ email: `first-${n}@example.com`, password: PASSWORD }),
        ),
      );
      const admitted = results.filter((r) => r.status === 'fulfilled');
      expect(admitted).toHaveLength(1);
      for (const r of results.filter((x) => x.status === 'rejected')) {
        const err = (r as PromiseRejectedResult).reason as CustosError;
        expect(err.kind).toBe('permission_denied');
        expect(err.type).toBe('signup_closed');
        expect(err.message).toMatch(/invitation only \(signup mode: invite\)/);
      }
      // Nothing of the refused signups was stored: one user, one org, one admin.
      expect(await i.count('users')).toBe(1);
      expect(await i.count('orgs')).toBe(1);
      const admins = await i.pool.query<{ email: string }>(
        'SELECT email FROM identity.users WHERE platform_admin',
      );
      expect(admins.rows).toHaveLength(1);
      const first = (
        admitted[0] as PromiseFulfilledResult<{ email: string; tokens?: { accessToken: string } }>
      ).value;
      expect(admins.rows[0]!.email).toBe(first.email);
      expect(claimsOf(first.tokens!.accessToken).platform_admin).toBe(true);
      // Audited once, as the install's first account.
      const created = await i.pool.query<{ payload: { action: string; metadata: Record<string, unknown> } }>(
        "SELECT payload FROM identity.outbox WHERE payload->>'action' = 'user.created'",
      );
      expect(created.rows.map((r) => r.payload.metadata)).toEqual([
        { method: 'signup', role: 'owner', platform_admin: true },
      ]);

      expect(
        await refusalOf(signups.signup({ email: 'later@example.com', password: PASSWORD })),
      ).toMatchObject({
        kind: 'permission_denied',
        type: 'signup_closed',
      });
      expect(await i.count('users')).toBe(1);
    });

    it('closed refuses every signup, and a signup for a taken address says signup_closed, not 409', async () => {
      const closed = i.signupsIn('closed');
      expect(
        await refusalOf(closed.signup({ email: 'someone@example.com', password: PASSWORD })),
      ).toMatchObject({
        kind: 'permission_denied',
        type: 'signup_closed',
        detail: expect.stringMatching(/signup mode: closed/),
      });
      const [taken] = (await i.pool.query<{ email: string }>('SELECT email FROM identity.users')).rows;
      expect(
        await refusalOf(i.signupsIn('invite').signup({ email: taken!.email, password: PASSWORD })),
      ).toMatchObject({
        type: 'signup_closed',
      });
      expect(await i.count('users')).toBe(1);
    });
  });

  describe('open mode on a fresh install', () => {
    let i: Awaited<ReturnType<typeof install>>;
    beforeAll(async () => {
      i = await install('custos_identity_signup_open', redis);
    });
    afterAll(() => i?.close());

    it('admits parallel signups; exactly one (the first) is platform admin', async () => {
      const signups = i.signupsIn('open');
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, n) =>
          signups.signup({ email: `open-${n}@example.com`, password: PASSWORD }),
        ),
      );
      expect(await i.count('users')).toBe(6);
      const admins = await i.pool.query<{ email: string }>(
        'SELECT email FROM identity.users WHERE platform_admin',
      );
      expect(admins.rows).toHaveLength(1);
      const withClaim = results.filter((r) => claimsOf(r.tokens!.accessToken).platform_admin === true);
      expect(withClaim.map((r) => r.email)).toEqual([admins.rows[0]!.email]);
      // The second account of the install is none.
      const later = await signups.signup({ email: 'open-later@example.com', password: PASSWORD });
      expect(claimsOf(later.tokens!.accessToken).platform_admin).toBeUndefined();
    });
  });

  describe('sessions and password hashes', () => {
    let i: Awaited<ReturnType<typeof install>>;
    beforeAll(async () => {
      i = await install('custos_identity_sessions', redis);
    });
    afterAll(() => i?.close());

    it('the first account is no platform admin when PLATFORM_ADMIN_EMAILS names the admins', async () => {
      const r = await i.signupsIn('invite', true).signup({ email: 'named@example.com', password: PASSWORD });
      expect(claimsOf(r.tokens!.accessToken).platform_admin).toBeUndefined();
      const admins = await i.pool.query('SELECT 1 FROM identity.users WHERE platform_admin');
      expect(admins.rows).toHaveLength(0);
    });

    it('a refresh-token family ends at its absolute lifetime, however often it rotated', async () => {
      const r = await i.signupsIn('open').signup({ email: 'refresh@example.com', password: PASSWORD });
      const once = await i.sessions.refresh(r.tokens!.refreshToken);
      const family = claimsOf(once.accessToken).sid as string;
      const rows = await i.pool.query<{ created_at: Date; expires_at: Date }>(
        'SELECT created_at, expires_at FROM identity.refresh_tokens WHERE family_id = $1 ORDER BY created_at',
        [family],
      );
      expect(rows.rows).toHaveLength(2);
      // No token of the family is issued to outlive it (REFRESH_TOKEN_TTL is a day here, the family 2 h).
      for (const row of rows.rows) {
        expect(row.expires_at.getTime()).toBeLessThanOrEqual(
          rows.rows[0]!.created_at.getTime() + FAMILY_TTL_SECONDS * 1000,
        );
      }
      const twice = await i.sessions.refresh(once.refreshToken);

      // The sign-in was longer ago than the family may live: the live token is refused.
      await i.pool.query(
        `UPDATE identity.refresh_tokens SET created_at = created_at - make_interval(secs => $2),
                expires_at = now() + interval '1 hour' WHERE family_id = $1`,
        [family, FAMILY_TTL_SECONDS + 1],
      );
      expect(await refusalOf(i.sessions.refresh(twice.refreshToken))).toMatchObject({
        kind: 'unauthenticated',
        detail: 'session expired: sign in again',
      });
      const after = await i.pool.query<{ n: string; used: string }>(
        'SELECT count(*) AS n, count(used_at) AS used FROM identity.refresh_tokens WHERE family_id = $1',
        [family],
      );
      // Nothing issued, the token not spent.
      expect(after.rows[0]).toEqual({ n: '3', used: '2' });
      // A new sign-in starts a new family that works.
      const again = await i.sessions.login({ email: 'refresh@example.com', password: PASSWORD });
      expect(again.kind).toBe('tokens');
      if (again.kind === 'tokens')
        await expect(i.sessions.refresh(again.tokens.refreshToken)).resolves.toBeTruthy();
    });

    it('a sign-in rehashes a hash weaker than the current parameters, and a failed rehash still signs in', async () => {
      await i.signupsIn('open').signup({ email: 'rehash@example.com', password: PASSWORD });
      const old = await hash(PASSWORD.normalize('NFKC'), {
        ...ARGON2_PARAMS,
        memoryCost: 19456,
        timeCost: 2,
      });
      const stored = async () =>
        (
          await i.pool.query<{ h: string }>(
            "SELECT password_hash AS h FROM identity.users WHERE email = 'rehash@example.com'",
          )
        ).rows[0]!.h;

      // The rehash write fails (a trigger refuses it): the sign-in succeeds, the old hash stays.
      await i.pool.query(`UPDATE identity.users SET password_hash = $1 WHERE email = 'rehash@example.com'`, [
        old,
      ]);
      await i.pool.query(`
        CREATE FUNCTION identity.refuse_rehash() RETURNS trigger LANGUAGE plpgsql AS
          $$ BEGIN RAISE EXCEPTION 'no rehash today'; END $$;
        CREATE TRIGGER refuse_rehash BEFORE UPDATE OF password_hash ON identity.users
          FOR EACH ROW EXECUTE FUNCTION identity.refuse_rehash();`);
      try {
        expect((await i.sessions.login({ email: 'rehash@example.com', password: PASSWORD })).kind).toBe(
          'tokens',
        );
        expect(await stored()).toBe(old);
      } finally {
        await i.pool.query(
          `DROP TRIGGER refuse_rehash ON identity.users; DROP FUNCTION identity.refuse_rehash();`,
        );
      }

      // Then it works: the stored hash now has today's parameters and still verifies.
      expect((await i.sessions.login({ email: 'rehash@example.com', password: PASSWORD })).kind).toBe(
        'tokens',
      );
      const upgraded = await stored();
      expect(upgraded).toMatch(/^\$argon2id\$v=19\$m=65536,t=3,p=1\$/);
      expect(await verifyPassword(upgraded, PASSWORD)).toBe(true);
      // A wrong password changes nothing.
      await i.pool.query(`UPDATE identity.users SET password_hash = $1 WHERE email = 'rehash@example.com'`, [
        old,
      ]);
      await expect(
        i.sessions.login({ email: 'rehash@example.com', password: `${PASSWORD}x` }),
      ).rejects.toThrow();
      expect(await stored()).toBe(old);
      // Re-auth (step-up) upgrades a weak hash too.
      const r = await i.signupsIn('open').signup({ email: 'reauth@example.com', password: PASSWORD });
      const claims = claimsOf(r.tokens!.accessToken);
      const principal = {
        kind: 'user',
        userId: String(claims.sub).slice('user:'.length),
        orgId: String(claims.org),
        role: 'owner',
        platformAdmin: false,
        requirePasskeyForVaults: false,
        amr: ['pwd'],
        tokenId: String(claims.jti),
        issuedAt: 0,
        expiresAt: 0,
        issuer: 'test',
      } as UserPrincipal;
      await i.pool.query(`UPDATE identity.users SET password_hash = $1 WHERE email = 'reauth@example.com'`, [
        old,
      ]);
      await i.reauth.reauthenticate(principal, {
        purpose: 'change_email',
        password: PASSWORD,
        totpCode: '',
        passkeyAssertionPresent: false,
      });
      const afterReauth = (
        await i.pool.query<{ h: string }>(
          "SELECT password_hash AS h FROM identity.users WHERE email = 'reauth@example.com'",
        )
      ).rows[0]!.h;
      expect(afterReauth).toMatch(/^\$argon2id\$v=19\$m=65536,t=3,p=1\$/);

      // A hash with today's parameters is left alone.
      const current = await hashPassword(PASSWORD);
      await i.pool.query(`UPDATE identity.users SET password_hash = $1 WHERE email = 'rehash@example.com'`, [
        current,
      ]);
      await i.sessions.login({ email: 'rehash@example.com', password: PASSWORD });
      expect(await stored()).toBe(current);
    });
  });
});
