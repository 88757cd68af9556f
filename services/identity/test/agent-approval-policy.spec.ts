import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { UserPrincipal } from '@custos/auth';
import type { ActionApprovalPolicy as PolicyMessage } from '@custos/proto/custos/identity/v1/agents';
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
import { GuardrailRevisionStore } from '../src/agents/guardrail-revision-store';
import { hashPassword } from '../src/credentials/password-fns';
import { SCHEMA } from '../src/db/schema';
import { agentChangeOf, agentMessage } from '../src/grpc/agent-messages';
import { MfaStore } from '../src/mfa/mfa-store';
import { TotpStepUpCodes } from '../src/mfa/totp-step-up';
import { RevocationStore } from '../src/tokens/revocation-store';
import { UserStore } from '../src/users/user-store';

// An agent's action_approval_policy with the consensus fields of issue 19 (self_approval_allowed,
// skip_when, require_when) through AgentService and the settings column, against real Postgres.

const logger = createLogger({ service: 'identity-test', level: 'silent' });
const PASSWORD = 'Correct-Horse-9-battery';

const cond = (c: { type: string } & Record<string, unknown>) => ({
  chains: [],
  addresses: [],
  selectors: [],
  intentTypes: [],
  actions: [],
  actionKinds: [],
  ...c,
});

const POLICY: PolicyMessage = {
  rules: [
    {
      conditions: [cond({ type: 'value_above', thresholdWei: '1000000000000000000' })],
      riskTier: 2,
      approval: {
        minApprovals: 2,
        requiredRoles: ['admin'],
        perRoleMinimums: {},
        requireCredentialTypes: [],
      },
      expirySecs: '3600',
      selfApprovalAllowed: false,
      skipWhen: [{ conditions: [cond({ type: 'to_address_in', addresses: ['0xabc'] })] }],
      requireWhen: [
        { conditions: [cond({ type: 'chain_in', chains: ['anvil', '31337'] })] },
        { conditions: [cond({ type: 'intent_type_in', intentTypes: ['transaction'] })] },
      ],
    },
  ],
};

describe('action_approval_policy of an agent (real Postgres)', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let db: Database;
  let redis: Redis;
  let agents: AgentService;
  let owner: UserPrincipal;

  beforeAll(async () => {
    database = await createTestDatabase('custos_identity_approval_policy');
    pool = createPool(database.url, 4, logger, 'identity-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    db = createDatabase(pool);
    redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
    const users = new UserStore(db);
    const reauth = new ReauthService(
      new AccountStore(db),
      users,
      logger,
      new TotpStepUpCodes(new MfaStore(db), randomBytes(32)),
    );
    agents = new AgentService(
      new AgentStore(db, pool),
      new RevocationStore(db, redis, logger),
      // Stands in for billing's GetOrgLimits (a peer): no cap on agents.
      { agentCap: async () => ({ maxAgents: -1, plan: 'test' }) },
      reauth,
      { revisions: new GuardrailRevisionStore(db), changesRequireApproval: async () => false },
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

  const fields = (policy: PolicyMessage, name?: string) =>
    agentChangeOf({ name, actionApprovalPolicy: policy, clearedFields: [] } as Parameters<
      typeof agentChangeOf
    >[0]);

  async function agentCount(): Promise<number> {
    const r = await db.execute<{ n: number }>(
      sql`select count(*)::int as n from identity.agents where org_id = ${owner.orgId}`,
    );
    return r.rows[0]!.n;
  }

  it('stores the rule’s self-approval, skip_when and require_when and answers them as sent', async () => {
    const { agent } = await agents.create(owner, fields(POLICY, 'approver'));
    const read = await agents.get(owner, agent.id);
    expect(agentMessage(read).actionApprovalPolicy).toEqual(POLICY);
    const stored = await db.execute<{ rule: Record<string, unknown> }>(
      sql`select settings->'action_approval_policy'->'rules'->0 as rule from identity.agents where id = ${agent.id}`,
    );
    expect(stored.rows[0]!.rule).toMatchObject({
      self_approval_allowed: false,
      skip_when: [{ conditions: [{ type: 'to_address_in', addresses: ['0xabc'] }] }],
      require_when: [
        { conditions: [{ type: 'chain_in', chains: ['anvil', '31337'] }] },
        { conditions: [{ type: 'intent_type_in', intent_types: ['transaction'] }] },
      ],
    });

    // An update (with its step-up) replaces them; an empty list clears them.
    const next: PolicyMessage = {
      rules: [{ ...POLICY.rules[0]!, selfApprovalAllowed: true, skipWhen: [], requireWhen: [] }],
    };
    const updated = await agents.update(owner, agent.id, fields(next), PASSWORD);
    expect(agentMessage(updated).actionApprovalPolicy).toEqual(next);
    expect(agentMessage(await agents.get(owner, agent.id)).actionApprovalPolicy).toEqual(next);
  });

  it('refuses 21 skip_when sets or a bad condition in require_when with a 400 naming it, storing nothing', async () => {
    const before = await agentCount();
    const tooMany: PolicyMessage = {
      rules: [
        {
          ...POLICY.rules[0]!,
          skipWhen: Array.from({ length: 21 }, () => ({ conditions: [cond({ type: 'always' })] })),
        },
      ],
    };
    const refusal = async (p: Promise<unknown>) =>
      p.then(
        () => undefined,
        (err: unknown) => (err instanceof CustosError ? { kind: err.kind, field: err.field } : err),
      );
    expect(await refusal(agents.create(owner, fields(tooMany, 'x')))).toEqual({
      kind: 'invalid_argument',
      field: 'action_approval_policy.rules[0].skip_when',
    });
    const badCondition: PolicyMessage = {
      rules: [{ ...POLICY.rules[0]!, requireWhen: [{ conditions: [cond({ type: 'erc20_amount_above' })] }] }],
    };
    expect(await refusal(agents.create(owner, fields(badCondition, 'y')))).toEqual({
      kind: 'invalid_argument',
      field: 'action_approval_policy.rules[0].require_when[0].conditions[0].threshold_raw',
    });
    expect(await agentCount()).toBe(before);

    // On update too: the stored policy stays as it was.
    const { agent } = await agents.create(owner, fields(POLICY, 'kept'));
    expect(await refusal(agents.update(owner, agent.id, fields(tooMany), PASSWORD))).toEqual({
      kind: 'invalid_argument',
      field: 'action_approval_policy.rules[0].skip_when',
    });
    expect(agentMessage(await agents.get(owner, agent.id)).actionApprovalPolicy).toEqual(POLICY);
  });

  it('refuses a rule over 32 KiB of JSON (approvals would refuse it with every action) with a 400 naming it, storing nothing', async () => {
    const refusal = async (p: Promise<unknown>) =>
      p.then(
        () => undefined,
        (err: unknown) =>
          err instanceof CustosError ? { kind: err.kind, field: err.field, status: err.httpStatus } : err,
      );
    // Each list within its limits (1,000 entries of 256 characters), the rule about 258 KB.
    const addresses = Array.from({ length: 1000 }, (_, i) => String(i).padStart(256, 'a'));
    const huge: PolicyMessage = {
      rules: [
        POLICY.rules[0]!,
        { ...POLICY.rules[0]!, conditions: [cond({ type: 'to_address_in', addresses })] },
      ],
    };
    const before = await agentCount();
    expect(await refusal(agents.create(owner, fields(huge, 'huge')))).toEqual({
      kind: 'invalid_argument',
      field: 'action_approval_policy.rules[1]',
      status: 400,
    });
    expect(await agentCount()).toBe(before);
    const { agent } = await agents.create(owner, fields(POLICY, 'kept-small'));
    expect(
      (await refusal(agents.update(owner, agent.id, fields(huge), PASSWORD))) as { field: string },
    ).toMatchObject({
      field: 'action_approval_policy.rules[1]',
    });
    expect(agentMessage(await agents.get(owner, agent.id)).actionApprovalPolicy).toEqual(POLICY);
  });
});
