import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { UserPrincipal } from '@custos/auth';
import { createDatabase, createLogger, createPool, migrateSchema } from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { SCHEMA } from '../src/db/schema';
import { GrantService, MAX_TRIGGERS_PER_AGENT } from '../src/grants/grant-service';
import { GrantStore } from '../src/grants/grant-store';
import type { VaultFacts } from '../src/grants/grant-types';

// Consensus triggers in Postgres: owners and admins only (a vault's creator who is a member manages
// its plain grants, not triggers), at most MAX_TRIGGERS_PER_AGENT per agent even when created in
// parallel, and signer's read lists exactly the agent's.

const logger = createLogger({ service: 'policy-test', level: 'silent' });
const person = (orgId: string, role: 'owner' | 'member'): UserPrincipal => ({
  kind: 'user',
  orgId,
  userId: randomUUID(),
  role,
  platformAdmin: false,
  amr: [],
  requirePasskeyForVaults: false,
  tokenId: 't',
  issuedAt: 0,
  expiresAt: 0,
  issuer: 'i',
});
const TRIGGER = {
  conditions: [{ type: 'always' as const }],
  riskTier: 1,
  approval: { minApprovals: 2 },
};

describe('consensus triggers in Postgres', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let service: GrantService;

  beforeAll(async () => {
    database = await createTestDatabase('custos_policy_triggers');
    pool = createPool(database.url, 8, logger, 'policy-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    service = new GrantService(new GrantStore(createDatabase(pool), pool));
  });
  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  const vaultOf = (orgId: string, createdBy: string): VaultFacts => ({
    vaultId: randomUUID(),
    orgId,
    createdBy,
    createdByType: 'user',
    isSystem: false,
  });
  const grant = (agentId: string, trigger = true) => ({
    secretPathPattern: 'pay/**',
    principalType: 'agent',
    principalId: agentId,
    permissions: ['read'],
    ...(trigger ? { consensusTrigger: TRIGGER } : {}),
  });

  it('refuses a member on a vault it created (403), for a trigger only, and stores nothing', async () => {
    const org = randomUUID();
    const member = person(org, 'member');
    const agent = randomUUID();
    const vault = vaultOf(org, member.userId);
    await expect(service.create(member, vault, grant(agent), true)).rejects.toMatchObject({
      kind: 'permission_denied',
    });
    const plain = await service.create(member, vault, grant(agent, false), true);
    await expect(
      service.update(member, vault, plain.id, { consensusTrigger: TRIGGER, cleared: [] }),
    ).rejects.toMatchObject({ kind: 'permission_denied' });
    expect(await service.agentApprovalRules(org, agent)).toEqual([]);
  });

  it(`keeps at most ${MAX_TRIGGERS_PER_AGENT} per agent, however many are created at once (409 consensus_trigger)`, async () => {
    const org = randomUUID();
    const admin = person(org, 'owner');
    const agent = randomUUID();
    const results = await Promise.allSettled(
      Array.from({ length: MAX_TRIGGERS_PER_AGENT + 5 }, () =>
        service.create(admin, vaultOf(org, admin.userId), grant(agent), true),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(MAX_TRIGGERS_PER_AGENT);
    for (const r of results.filter((x) => x.status === 'rejected'))
      expect((r as PromiseRejectedResult).reason).toMatchObject({
        kind: 'conflict',
        field: 'consensus_trigger',
      });
    expect(await service.agentApprovalRules(org, agent)).toHaveLength(MAX_TRIGGERS_PER_AGENT);
    // Another agent, or the same agent id asked for under another org, has none.
    expect(await service.agentApprovalRules(org, randomUUID())).toEqual([]);
    expect(await service.agentApprovalRules(randomUUID(), agent)).toEqual([]);
  });
});
