import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { UserPrincipal } from '@custos/auth';
import { NotFoundError, createDatabase, createLogger, createPool, migrateSchema } from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { SCHEMA } from '../src/db/schema';
import { GrantService } from '../src/grants/grant-service';
import { GrantStore } from '../src/grants/grant-store';
import type { VaultFacts } from '../src/grants/grant-types';

// Policy takes a vault's facts from its caller (the gateway asks vault-crypto). Facts that claim
// the caller's org for another org's vault id must reach none of that org's grants.

const logger = createLogger({ service: 'policy-test', level: 'silent' });

const owner = (orgId: string): UserPrincipal => ({
  kind: 'user',
  orgId,
  userId: randomUUID(),
  role: 'owner',
  platformAdmin: false,
  amr: [],
  requirePasskeyForVaults: false,
  tokenId: 't',
  issuedAt: 0,
  expiresAt: 0,
  issuer: 'i',
});

describe('grants stay in their org, whatever facts a caller sends', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let service: GrantService;

  beforeAll(async () => {
    database = await createTestDatabase('custos_policy');
    pool = createPool(database.url, 4, logger, 'policy-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    service = new GrantService(new GrantStore(createDatabase(pool), pool));
  });
  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  it('lists, changes, deletes and decides on another org’s vault id as if it had no grants', async () => {
    const orgB = randomUUID();
    const ownerB = owner(orgB);
    const vaultId = randomUUID();
    const truth: VaultFacts = {
      vaultId,
      orgId: orgB,
      createdBy: ownerB.userId,
      createdByType: 'user',
      isSystem: false,
    };
    const agentB = randomUUID();
    const grant = await service.create(
      ownerB,
      truth,
      { secretPathPattern: 'app/*', principalType: 'agent', principalId: agentB, permissions: ['read'] },
      true,
    );

    const attacker = owner(randomUUID());
    const forged: VaultFacts = { ...truth, orgId: attacker.orgId, createdBy: attacker.userId };
    expect(await service.list(attacker, forged)).toEqual([]);
    await expect(
      service.update(attacker, forged, grant.id, { secretPathPattern: '**', cleared: [] }),
    ).rejects.toBeInstanceOf(NotFoundError);
    await expect(service.delete(attacker, forged, grant.id)).rejects.toBeInstanceOf(NotFoundError);

    // A grant made under forged facts lands in the attacker's org and opens nothing of org B's vault.
    const agentA = randomUUID();
    await service.create(
      attacker,
      forged,
      {
        secretPathPattern: '**',
        principalType: 'agent',
        principalId: agentA,
        permissions: ['read', 'write'],
      },
      true,
    );
    const asAgentA = {
      kind: 'agent' as const,
      orgId: orgB,
      agentId: agentA,
      scopes: [],
      vaultIds: [],
      intentsApiEnabled: false,
      proxyEnabled: false,
      tokenId: 't',
      issuedAt: 0,
      expiresAt: 0,
      issuer: 'i',
    };
    const d = await service.decide(
      asAgentA,
      { vaultId, vaultOrgId: orgB, path: 'app/x', permission: 'read' },
      undefined,
    );
    expect(d.allowed).toBe(false);

    // Org B's own view is untouched.
    const mine = await service.list(ownerB, truth);
    expect(mine.map((g) => [g.id, g.secretPathPattern])).toEqual([[grant.id, 'app/*']]);
  });
});
