import path from 'node:path';
import type { UserPrincipal } from '@custos/auth';
import {
  CustosError,
  createDatabase,
  createLogger,
  createPool,
  migrateSchema,
  type Database,
} from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { sql } from 'drizzle-orm';
import { Redis } from 'ioredis';
import { AccountStore } from '../src/account/account-store';
import { PasswordService } from '../src/account/password-service';
import { ReauthService } from '../src/account/reauth-service';
import { hashPassword, verifyPassword } from '../src/credentials/password-fns';
import { SCHEMA } from '../src/db/schema';
import { Notifier } from '../src/notifications/notifier';
import { RevocationStore } from '../src/tokens/revocation-store';
import { UserStore } from '../src/users/user-store';

const logger = createLogger({ service: 'identity-test', level: 'silent' });
const PASSWORD = 'Correct-Horse-9-battery';

/** The refusal a promise ends with (kind, field, type), for compact assertions. */
async function refusal(p: Promise<unknown>) {
  try {
    await p;
  } catch (err) {
    if (err instanceof CustosError) return { kind: err.kind, field: err.field, type: err.type };
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('account rules against Postgres', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let db: Database;
  let redis: Redis;
  let users: UserStore;
  let reauth: ReauthService;
  let passwords: PasswordService;
  const notifier = new Notifier({ send: async () => undefined }, 'http://127.0.0.1:8080');

  beforeAll(async () => {
    database = await createTestDatabase('custos_identity_account');
    pool = createPool(database.url, 8, logger, 'identity-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    db = createDatabase(pool);
    redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
    users = new UserStore(db);
    const store = new AccountStore(db);
    reauth = new ReauthService(store, users, logger);
    const revocations = new RevocationStore(db, redis, logger);
    passwords = new PasswordService(store, users, reauth, revocations, notifier, logger);
  });

  afterAll(async () => {
    redis?.disconnect();
    await pool?.end();
    await database?.drop();
  });

  async function user(opts: { password: boolean }): Promise<UserPrincipal> {
    const email = `u-${Math.random().toString(36).slice(2)}@example.com`;
    const u = await users.createUserWithOrg({
      email,
      displayName: '',
      passwordHash: await hashPassword(PASSWORD),
      orgName: 'org',
      emailVerified: true,
    });
    // An account made by a social sign-in has no password.
    if (!opts.password)
      await db.execute(sql`update identity.users set password_hash = null where id = ${u!.id}`);
    return {
      kind: 'user',
      userId: u!.id,
      orgId: u!.orgId,
      role: 'owner',
      platformAdmin: false,
      requirePasskeyForVaults: false,
      amr: ['pwd'],
      tokenId: 'jti',
      issuedAt: 0,
      expiresAt: 0,
      issuer: 'test',
    };
  }

  it('sets the first password of an account without one, once', async () => {
    const p = await user({ password: false });
    const next = 'Fresh-Horse-4-battery';
    expect(await refusal(passwords.setPassword(p, next, `${next}x`))).toMatchObject({
      field: 'password_confirm',
    });
    expect(await refusal(passwords.setPassword(p, 'weak', 'weak'))).toMatchObject({
      kind: 'invalid_argument',
      field: 'password',
    });
    expect((await users.findById(p.userId))!.passwordHash).toBeNull();

    await passwords.setPassword(p, next, next);
    const stored = (await users.findById(p.userId))!.passwordHash!;
    expect(await verifyPassword(stored, next)).toBe(true);

    expect(await refusal(passwords.setPassword(p, PASSWORD, PASSWORD))).toMatchObject({ field: 'password' });
    expect(await verifyPassword((await users.findById(p.userId))!.passwordHash!, next)).toBe(true);
  });

  it('refuses password re-auth and change-password for an account without a password', async () => {
    const p = await user({ password: false });
    expect(
      await refusal(
        reauth.reauthenticate(p, {
          purpose: 'account.delete',
          password: PASSWORD,
          totpCode: '',
          passkeyAssertionPresent: false,
        }),
      ),
    ).toMatchObject({ field: 'password' });
    expect(await refusal(reauth.confirmStepUp(p, 'account.delete', PASSWORD))).toMatchObject({
      kind: 'permission_denied',
      type: 'step_up_required',
    });
    expect(await refusal(passwords.changePassword(p, PASSWORD, 'Fresh-Horse-4-battery'))).toMatchObject({
      field: 'current_password',
    });
  });

  it('accepts a rat_ token once, for its purpose and user only, and not after it expires', async () => {
    const p = await user({ password: true });
    const other = await user({ password: true });
    const issue = async (purpose: string) =>
      (
        await reauth.reauthenticate(p, {
          purpose,
          password: PASSWORD,
          totpCode: '',
          passkeyAssertionPresent: false,
        })
      ).token;

    const t = await issue('account.delete');
    expect(await refusal(reauth.confirmStepUp(p, 'security.passkey.delete', t))).toMatchObject({
      type: 'step_up_required',
    });
    expect(await refusal(reauth.confirmStepUp(other, 'account.delete', t))).toMatchObject({
      type: 'step_up_required',
    });
    await reauth.confirmStepUp(p, 'account.delete', t);
    expect(await refusal(reauth.confirmStepUp(p, 'account.delete', t))).toMatchObject({
      kind: 'permission_denied',
      type: 'step_up_required',
    });

    const expired = await issue('account.delete');
    const id = expired.slice('rat_'.length).split('_')[0]!;
    await db.execute(
      sql`update identity.reauth_tokens set expires_at = now() - interval '1 second' where id = ${id}`,
    );
    expect(await refusal(reauth.confirmStepUp(p, 'account.delete', expired))).toMatchObject({
      type: 'step_up_required',
    });
  });

  it('lifts the re-auth lock 15 minutes after the tenth failure', async () => {
    const p = await user({ password: true });
    const hash = (await users.findById(p.userId))!.passwordHash!;
    const me = { id: p.userId, orgId: p.orgId };
    for (let i = 0; i < 10; i++)
      expect(await reauth.checkPassword(me, hash, 'Wrong-1-password', 'test.purpose')).toBe(false);
    expect(await refusal(reauth.checkPassword(me, hash, PASSWORD, 'test.purpose'))).toMatchObject({
      kind: 'rate_limited',
    });
    // Sixteen minutes later (the failures are moved back rather than the clock forward).
    await db.execute(
      sql`update identity.reauth_failures set failed_at = failed_at - interval '16 minutes' where user_id = ${p.userId}`,
    );
    expect(await reauth.checkPassword(me, hash, PASSWORD, 'test.purpose')).toBe(true);
    // Still ten failures in the hour: the next wrong password locks again at once.
    expect(await reauth.checkPassword(me, hash, 'Wrong-1-password', 'test.purpose')).toBe(false);
    expect(await refusal(reauth.checkPassword(me, hash, PASSWORD, 'test.purpose'))).toMatchObject({
      kind: 'rate_limited',
    });
    // Every wrong password is an audit record under the user's org; a locked attempt checks nothing.
    const audited = await db.execute<{ n: number }>(
      sql`select count(*)::int as n from identity.outbox where name = 'audit.recorded'
          and payload->>'action' = 'auth.reauth_failed' and payload->>'resource_id' = ${p.userId}
          and payload->>'org_id' = ${p.orgId} and payload->'metadata'->>'purpose' = 'test.purpose'`,
    );
    expect(audited.rows[0]!.n).toBe(11);
  });
});
