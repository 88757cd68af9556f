import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import type { UserPrincipal } from '@custos/auth';
import {
  CustosError,
  type Database,
  createDatabase,
  createLogger,
  createPool,
  migrateSchema,
} from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { sql } from 'drizzle-orm';
import { Redis } from 'ioredis';
import { AccountStore } from '../src/account/account-store';
import { ReauthService } from '../src/account/reauth-service';
import { AgentService } from '../src/agents/agent-service';
import { AgentStore } from '../src/agents/agent-store';
import type { AgentChange } from '../src/agents/agent-types';
import { GuardrailRevisionStore } from '../src/agents/guardrail-revision-store';
import { hashPassword } from '../src/credentials/password-fns';
import { SCHEMA } from '../src/db/schema';
import { MfaStore } from '../src/mfa/mfa-store';
import { TotpStepUpCodes } from '../src/mfa/totp-step-up';
import { AdminStore } from '../src/orgs/admin-store';
import { RevocationStore } from '../src/tokens/revocation-store';
import { UserStore } from '../src/users/user-store';
import { changesRequireApproval } from '../src/wiring/agents';

// Guardrail revisions and held widening edits (issue 20) through AgentService, against real
// Postgres: the setting is read from admin_settings as the service does.

const logger = createLogger({ service: 'identity-test', level: 'silent' });
const PASSWORD = 'Correct-Horse-9-battery';

const refusal = async (p: Promise<unknown>) =>
  p.then(
    () => 'applied',
    (err: unknown) =>
      err instanceof CustosError ? { status: err.httpStatus, type: err.type, field: err.field } : err,
  );

describe('guardrail revisions and approval-gated widening (real Postgres)', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let db: Database;
  let redis: Redis;
  let agents: AgentService;
  let admin: AdminStore;
  let owner: UserPrincipal;

  beforeAll(async () => {
    database = await createTestDatabase('custos_identity_guardrail_revisions');
    pool = createPool(database.url, 6, logger, 'identity-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    db = createDatabase(pool);
    redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
    const users = new UserStore(db);
    admin = new AdminStore(db);
    const reauth = new ReauthService(
      new AccountStore(db),
      users,
      logger,
      new TotpStepUpCodes(new MfaStore(db), randomBytes(32)),
    );
    agents = new AgentService(
      new AgentStore(db, pool),
      new RevocationStore(db, redis, logger),
      { agentCap: async () => ({ maxAgents: -1, plan: 'test' }) },
      reauth,
      {
        revisions: new GuardrailRevisionStore(db),
        changesRequireApproval: () => changesRequireApproval(admin),
      },
    );
    const u = await users.createUserWithOrg({
      email: `o-${randomBytes(4).toString('hex')}@example.com`,
      displayName: '',
      passwordHash: await hashPassword(PASSWORD),
      orgName: 'org',
      emailVerified: true,
    });
    owner = {
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
  });

  afterAll(async () => {
    redis?.disconnect();
    await pool?.end();
    await database?.drop();
  });

  const setting = (value: 'true' | 'false') =>
    admin.putSetting({ name: 'guardrail_changes_require_approval', value, updatedBy: owner.userId });
  const limit = (v: string | null): AgentChange => ({ settings: { txMaxValueEth: v } });
  const revisionCount = async (agentId: string) =>
    (
      await db.execute<{ n: number }>(
        sql`select count(*)::int as n from identity.guardrail_revisions where agent_id = ${agentId}`,
      )
    ).rows[0]!.n;

  it('writes a revision for every applied guardrail edit, with before, after and the change; none for other fields', async () => {
    await setting('false');
    const { agent } = await agents.create(owner, { name: 'rev', settings: { txMaxValueEth: '1' } });
    const r = await agents.edit(owner, agent.id, limit('5'), PASSWORD);
    expect(r.applied).toBe(true);
    expect(r.guardrailChange).toMatchObject({ change: 'widen', approvalRequired: false });
    expect(r.guardrailChange!.before['tx_max_value_eth']).toBe('1');
    expect(r.guardrailChange!.after['tx_max_value_eth']).toBe('5');
    expect(r.agent.settings.txMaxValueEth).toBe('5');
    await agents.edit(owner, agent.id, { name: 'renamed', settings: {} }, '');
    await agents.edit(owner, agent.id, { settings: { rawSigningEnabled: false } }, PASSWORD);
    const list = await agents.revisions(owner, { agentId: agent.id, limit: 0 });
    expect(list.map((v) => v.change)).toEqual(['same', 'widen']);
    expect(list[1]).toMatchObject({
      id: r.revisionId,
      actorId: owner.userId,
      orgId: owner.orgId,
      approvalId: null,
      before: expect.objectContaining({ tx_max_value_eth: '1' }),
      after: expect.objectContaining({ tx_max_value_eth: '5' }),
    });
    expect(await agents.revisions(owner, { agentId: agent.id, limit: 1 })).toHaveLength(1);
  });

  it('holds a widening edit when the setting is "true": nothing written; a narrowing applies at once', async () => {
    const { agent } = await agents.create(owner, { name: 'held', settings: { txMaxValueEth: '1' } });
    await setting('true');
    try {
      const held = await agents.edit(owner, agent.id, limit('10'), PASSWORD);
      expect(held.applied).toBe(false);
      expect(held.guardrailChange).toMatchObject({ change: 'widen', approvalRequired: true });
      expect(held.guardrailChange!.changeHash).toMatch(/^[0-9a-f]{64}$/);
      expect((await agents.get(owner, agent.id)).settings.txMaxValueEth).toBe('1');
      expect(await revisionCount(agent.id)).toBe(0);
      // Clearing a limit and enabling a signing path widen too; a mixed edit is held as well.
      for (const change of [
        limit(null),
        { settings: { messageSigningEnabled: true } },
        { settings: { txMaxValueEth: '0.5', rawSigningEnabled: true } },
      ] as AgentChange[]) {
        const r = await agents.edit(owner, agent.id, change, PASSWORD);
        expect(r.applied).toBe(false);
        expect(['widen', 'mixed']).toContain(r.guardrailChange!.change);
      }
      // The dry run answers the same hash and writes nothing.
      const dry = await agents.edit(owner, agent.id, limit('10'), PASSWORD, { dryRun: true });
      expect(dry.applied).toBe(false);
      expect(dry.guardrailChange!.changeHash).toBe(held.guardrailChange!.changeHash);
      // A narrowing applies at once.
      const narrow = await agents.edit(owner, agent.id, limit('0.5'), PASSWORD);
      expect(narrow.applied).toBe(true);
      expect(narrow.guardrailChange!.change).toBe('narrow');
      expect((await agents.get(owner, agent.id)).settings.txMaxValueEth).toBe('0.5');
      expect(await revisionCount(agent.id)).toBe(1);
      // The step-up is still asked first: without it nothing is held or applied.
      expect(await refusal(agents.edit(owner, agent.id, limit('10'), ''))).toMatchObject({
        status: 403,
        type: 'step_up_required',
      });
    } finally {
      await setting('false');
    }
  });

  it('applies a held edit through a consumed approval only for the hash it was bound to, once', async () => {
    const { agent } = await agents.create(owner, { name: 'approved', settings: { txMaxValueEth: '1' } });
    await setting('true');
    try {
      const held = await agents.edit(owner, agent.id, limit('10'), PASSWORD);
      const hash = held.guardrailChange!.changeHash;
      // Another body under the same approval: the hash differs, nothing changes.
      const approvalId = randomUUID();
      expect(
        await refusal(
          agents.edit(owner, agent.id, limit('11'), '', { approval: { id: approvalId, changeHash: hash } }),
        ),
      ).toEqual({ status: 409, type: 'guardrail_change_stale', field: 'approval_id' });
      expect((await agents.get(owner, agent.id)).settings.txMaxValueEth).toBe('1');
      // The approval names only guardrail edits.
      expect(
        await refusal(
          agents.edit(owner, agent.id, { name: 'x', settings: {} }, '', {
            approval: { id: approvalId, changeHash: hash },
          }),
        ),
      ).toMatchObject({ status: 400, field: 'approval_id' });
      // Two parallel uses of one approval: one applies, the other changes nothing.
      const results = await Promise.all(
        [0, 1].map(() =>
          refusal(
            agents.edit(owner, agent.id, limit('10'), '', { approval: { id: approvalId, changeHash: hash } }),
          ),
        ),
      );
      expect(results.filter((r) => r === 'applied')).toHaveLength(1);
      expect((await agents.get(owner, agent.id)).settings.txMaxValueEth).toBe('10');
      const [latest] = await agents.revisions(owner, { agentId: agent.id, limit: 10 });
      expect(latest).toMatchObject({ change: 'widen', approvalId });
      expect(await revisionCount(agent.id)).toBe(1);
    } finally {
      await setting('false');
    }
  });

  it('lists revisions for owners and admins only, and checks the filters', async () => {
    const member: UserPrincipal = { ...owner, role: 'member' };
    expect(await refusal(agents.revisions(member, { agentId: '', limit: 0 }))).toMatchObject({ status: 403 });
    expect(await refusal(agents.revisions(owner, { agentId: 'nope', limit: 0 }))).toMatchObject({
      status: 400,
      field: 'agent_id',
    });
    expect(await refusal(agents.revisions(owner, { agentId: '', limit: 501 }))).toMatchObject({
      status: 400,
      field: 'limit',
    });
    const all = await agents.revisions(owner, { agentId: '', limit: 0 });
    const times = all.map((r) => r.createdAt.getTime());
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    // Another org sees none of them.
    expect(await agents.revisions({ ...owner, orgId: randomUUID() }, { agentId: '', limit: 0 })).toEqual([]);
  });
});
