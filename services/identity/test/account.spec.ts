import { randomBytes, randomUUID } from 'node:crypto';
import path from 'node:path';
import { type UserPrincipal, revocationKey } from '@custos/auth';
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
import { base32Encode, totpCode, totpStep } from '../src/credentials/totp-fns';
import { sealTotpSecret } from '../src/mfa/mfa-fns';
import { MfaStore } from '../src/mfa/mfa-store';
import { OrgService } from '../src/orgs/org-service';
import { OrgStore } from '../src/orgs/org-store';
import type { TokenIssuer } from '../src/tokens/token-issuer';
import { TotpStepUpCodes } from '../src/mfa/totp-step-up';
import { SCHEMA } from '../src/db/schema';
import { Notifier } from '../src/notifications/notifier';
import { RevocationStore } from '../src/tokens/revocation-store';
import { UserStore } from '../src/users/user-store';

const logger = createLogger({ service: 'identity-test', level: 'silent' });
const PASSWORD = 'Correct-Horse-9-battery';
const TOTP_KEK = randomBytes(32);

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
    reauth = new ReauthService(store, users, logger, new TotpStepUpCodes(new MfaStore(db), TOTP_KEK));
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

  /** A session (refresh family) of the user that started `agoMs` ago; the principal carries it. */
  async function withSession(p: UserPrincipal, agoMs: number): Promise<UserPrincipal> {
    const sid = randomUUID();
    await db.execute(
      sql`insert into identity.refresh_tokens (id, family_id, user_id, secret_hash, amr, created_at, expires_at)
          values (${randomUUID()}, ${sid}, ${p.userId}, 'x', '["google"]'::jsonb,
                  now() - make_interval(secs => ${agoMs / 1000}), now() + interval '1 day')`,
    );
    return { ...p, sessionId: sid, amr: ['google'] };
  }

  /** Turns TOTP on for the user; returns the current code. */
  async function enrolTotp(p: UserPrincipal): Promise<() => string> {
    const secret = randomBytes(20);
    await db.execute(
      sql`update identity.users set totp_enabled = true, totp_secret_enc = ${sealTotpSecret(secret, TOTP_KEK, p.userId)}
          where id = ${p.userId}`,
    );
    const b32 = base32Encode(secret);
    return () => totpCode(b32, totpStep(Date.now()));
  }

  it('sets the first password of an account without one, once, after a step-up', async () => {
    const p = await withSession(await user({ password: false }), 0);
    const next = 'Fresh-Horse-4-battery';
    const rat = async () =>
      (
        await reauth.reauthenticate(p, {
          purpose: 'account.password.set',
          password: '',
          totpCode: '',
          passkeyAssertionPresent: false,
        })
      ).token;
    expect(await refusal(passwords.setPassword(p, next, `${next}x`, await rat()))).toMatchObject({
      field: 'password_confirm',
    });
    expect(await refusal(passwords.setPassword(p, 'weak', 'weak', await rat()))).toMatchObject({
      kind: 'invalid_argument',
      field: 'password',
    });
    // No step-up, or a password (the account has none): refused, nothing set.
    expect(await refusal(passwords.setPassword(p, next, next, ''))).toMatchObject({
      type: 'step_up_required',
    });
    expect(await refusal(passwords.setPassword(p, next, next, PASSWORD))).toMatchObject({
      type: 'step_up_required',
    });
    expect((await users.findById(p.userId))!.passwordHash).toBeNull();

    await passwords.setPassword(p, next, next, await rat());
    const stored = (await users.findById(p.userId))!.passwordHash!;
    expect(await verifyPassword(stored, next)).toBe(true);

    expect(await refusal(passwords.setPassword(p, PASSWORD, PASSWORD, next))).toMatchObject({
      field: 'password',
    });
    expect(await verifyPassword((await users.findById(p.userId))!.passwordHash!, next)).toBe(true);
  });

  it('proves an account with neither password nor TOTP by a sign-in of the last five minutes only', async () => {
    const input = {
      purpose: 'account.password.set',
      password: '',
      totpCode: '',
      passkeyAssertionPresent: false,
    };
    const base = await user({ password: false });
    const stale = await withSession(base, 6 * 60_000);
    expect(await refusal(reauth.reauthenticate(stale, input))).toMatchObject({
      kind: 'permission_denied',
      type: 'step_up_required',
    });
    // A token from an API key, or with no session, proves nothing.
    const fresh = await withSession(base, 0);
    expect(await refusal(reauth.reauthenticate({ ...fresh, amr: ['api_key'] }, input))).toMatchObject({
      type: 'step_up_required',
    });
    expect(await refusal(reauth.reauthenticate(base, input))).toMatchObject({ type: 'step_up_required' });
    expect((await reauth.reauthenticate(fresh, input)).token).toMatch(/^rat_/);
    // An account with a password must type it.
    const withPassword = await withSession(await user({ password: true }), 0);
    expect(await refusal(reauth.reauthenticate(withPassword, input))).toMatchObject({ field: 'password' });
  });

  it('accepts a TOTP code as a step-up and for a rat_ token, each code once, behind the lockout', async () => {
    const p = await user({ password: true });
    const code = await enrolTotp(p);
    const now = code();
    await reauth.confirmStepUp(p, 'account.email.change', now);
    // The same code again: refused (its time step was spent), and audited as a refusal.
    expect(await refusal(reauth.confirmStepUp(p, 'account.email.change', now))).toMatchObject({
      kind: 'permission_denied',
      type: 'step_up_required',
    });
    expect(
      await refusal(
        reauth.reauthenticate(p, {
          purpose: 'account.delete',
          password: '',
          totpCode: now,
          passkeyAssertionPresent: false,
        }),
      ),
    ).toMatchObject({ kind: 'permission_denied', field: 'totp_code' });
    const audited = await db.execute<{ n: number }>(
      sql`select count(*)::int as n from identity.outbox where name = 'audit.recorded'
          and payload->>'action' = 'auth.reauth_failed' and payload->>'resource_id' = ${p.userId}
          and payload->'metadata'->>'method' = 'totp'`,
    );
    expect(audited.rows[0]!.n).toBe(2);
    // The password still works as a step-up for a TOTP user.
    await reauth.confirmStepUp(p, 'account.email.change', PASSWORD);
    // Without TOTP, six digits are read as a (wrong) password.
    const plain = await user({ password: true });
    expect(await refusal(reauth.confirmStepUp(plain, 'account.email.change', '123456'))).toMatchObject({
      type: 'step_up_required',
    });
  });

  it('checks parallel TOTP step-ups of one user without waiting for a second connection (more than the pool holds)', async () => {
    const p = await user({ password: true });
    await enrolTotp(p);
    // Twelve wrong codes at once against a pool of 8: each check holds one connection under the
    // user's lock; one that asked for a second would leave the pool exhausted until timeouts.
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        refusal(reauth.confirmStepUp(p, 'account.email.change', String(100000 + i))),
      ),
    );
    const kinds = answers.map((a) => (a as { kind?: string }).kind);
    expect(kinds.filter((k) => k === 'permission_denied')).toHaveLength(10);
    expect(kinds.filter((k) => k === 'rate_limited')).toHaveLength(2);
  });

  it('confirms a step-up for another service only for a live user of the named org', async () => {
    const p = await user({ password: true });
    const other = await user({ password: true });
    expect(
      await refusal(reauth.confirmUserStepUp(p.userId, other.orgId, 'org.encryption_key.rotate', PASSWORD)),
    ).toMatchObject({ kind: 'unauthenticated' });
    expect(
      await refusal(
        reauth.confirmUserStepUp(p.userId, p.orgId, 'org.encryption_key.rotate', 'Wrong-1-password'),
      ),
    ).toMatchObject({ kind: 'permission_denied', type: 'step_up_required' });
    expect(await reauth.confirmUserStepUp(p.userId, p.orgId, 'org.encryption_key.rotate', PASSWORD)).toBe(
      'password',
    );
  });

  it('names the credential a step-up for another service proved: rat_ token, TOTP code or password', async () => {
    const p = await user({ password: true });
    const code = await enrolTotp(p);
    const rat = (
      await reauth.reauthenticate(p, {
        purpose: 'approval.decide',
        password: PASSWORD,
        totpCode: '',
        passkeyAssertionPresent: false,
      })
    ).token;
    expect(await reauth.confirmUserStepUp(p.userId, p.orgId, 'approval.decide', rat)).toBe('reauth_token');
    const now = code();
    expect(await reauth.confirmUserStepUp(p.userId, p.orgId, 'approval.decide', now)).toBe('totp');
    // A spent code proves nothing, and names no method: it is refused.
    expect(await refusal(reauth.confirmUserStepUp(p.userId, p.orgId, 'approval.decide', now))).toMatchObject({
      kind: 'permission_denied',
      type: 'step_up_required',
    });
    expect(await reauth.confirmUserStepUp(p.userId, p.orgId, 'approval.decide', PASSWORD)).toBe('password');
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
    expect(
      await refusal(passwords.changePassword(p, PASSWORD, 'Fresh-Horse-4-battery', PASSWORD)),
    ).toMatchObject({
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

  describe('member role change', () => {
    /** An owner and a member of the owner's org. */
    async function orgPair() {
      const owner = await user({ password: true });
      const member = await user({ password: true });
      await db.execute(sql`update identity.users set org_id = ${owner.orgId} where id = ${member.userId}`);
      await db.execute(
        sql`insert into identity.org_members (org_id, user_id, role) values (${owner.orgId}, ${member.userId}, 'member')`,
      );
      return { owner, member };
    }
    const issuer = { settings: { userAccessTtlSeconds: 900 } } as unknown as TokenIssuer;
    const roleOf = async (orgId: string, userId: string) =>
      (
        await db.execute<{ role: string }>(
          sql`select role from identity.org_members where org_id = ${orgId} and user_id = ${userId}`,
        )
      ).rows[0]?.role;
    const revocationOf = async (userId: string) =>
      (
        await db.execute<{ n: number }>(
          sql`select count(*)::int as n from identity.revocations where kind = 'sub' and value = ${`user:${userId}`}`,
        )
      ).rows[0]!.n;

    it('needs a step-up, and records the revocation with the change', async () => {
      const orgs = new OrgService(new OrgStore(db), issuer, new RevocationStore(db, redis, logger), reauth);
      const { owner, member } = await orgPair();
      expect(await refusal(orgs.updateRole(owner, member.userId, 'admin', ''))).toMatchObject({
        type: 'step_up_required',
      });
      expect(await refusal(orgs.updateRole(owner, member.userId, 'admin', 'Wrong-1-password'))).toMatchObject(
        {
          kind: 'permission_denied',
          type: 'step_up_required',
        },
      );
      expect(await roleOf(owner.orgId, member.userId)).toBe('member');
      expect(await revocationOf(member.userId)).toBe(0);
      expect((await orgs.updateRole(owner, member.userId, 'admin', PASSWORD)).role).toBe('admin');
      expect(await roleOf(owner.orgId, member.userId)).toBe('admin');
      expect(await revocationOf(member.userId)).toBe(1);
      // Published where the gateway checks it.
      expect(await redis.exists(revocationKey('sub', `user:${member.userId}`))).toBe(1);
    });

    it('answers 503 and changes nothing when the revocation cannot be published', async () => {
      const deadRedis = new Redis('redis://127.0.0.1:1', {
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        enableOfflineQueue: false,
        retryStrategy: () => null,
      });
      deadRedis.on('error', () => undefined);
      try {
        const orgs = new OrgService(
          new OrgStore(db),
          issuer,
          new RevocationStore(db, deadRedis, logger),
          reauth,
        );
        const { owner, member } = await orgPair();
        expect(await refusal(orgs.updateRole(owner, member.userId, 'admin', PASSWORD))).toMatchObject({
          kind: 'unavailable',
        });
        // Rolled back with the revocation: the member keeps the old role and its tokens.
        expect(await roleOf(owner.orgId, member.userId)).toBe('member');
        expect(await revocationOf(member.userId)).toBe(0);
      } finally {
        deadRedis.disconnect();
      }
    });
  });
});
