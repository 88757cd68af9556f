import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Principal } from '@custos/auth';
import {
  ConflictError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  createDatabase,
  createLogger,
  createPool,
  migrateSchema,
} from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { ChainService } from '../src/chains/chain-service';
import { ChainStore } from '../src/chains/chain-store';
import { SCHEMA } from '../src/db/schema';

const logger = createLogger({ service: 'signer-test', level: 'silent' });

const user = (platformAdmin: boolean): Principal =>
  ({
    kind: 'user',
    userId: randomUUID(),
    orgId: randomUUID(),
    role: 'owner',
    platformAdmin,
    amr: ['pwd'],
    requirePasskeyForVaults: false,
    tokenId: randomUUID(),
    issuedAt: 0,
    expiresAt: 0,
    issuer: 'test',
  }) as Principal;

// The registry in Postgres: start-up seeding is idempotent and keeps admins' edits, the install's
// CHAIN_RPC_URLS and the local chain are applied at every start, and the database keeps names and
// (family, chain_id) unique.
describe('chains registry in Postgres', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let chains: ChainService;
  const admin = user(true);

  beforeAll(async () => {
    database = await createTestDatabase('custos_signer');
    pool = createPool(database.url, 8, logger, 'signer-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    chains = new ChainService(new ChainStore(createDatabase(pool)), logger);
  });
  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  it('seeds once, applies CHAIN_RPC_URLS and the local chain, and keeps an admin’s edits across starts', async () => {
    await chains.bootstrap({ rpcUrls: '', localRpcUrl: '' });
    const first = await chains.list(admin, true);
    expect(first.map((c) => c.name).sort()).toEqual([
      'arbitrum',
      'base',
      'bitcoin',
      'cardano',
      'ethereum',
      'optimism',
      'polygon',
      'sepolia',
      'solana',
      'tron',
      'xrp',
    ]);
    expect(first.every((c) => c.rpcUrl === '')).toBe(true);

    await chains.update(admin, 'polygon', { isEnabled: false });
    await chains.bootstrap({
      rpcUrls: 'ethereum=https://eth.example/v3/key,unknown-chain=https://x.example',
      localRpcUrl: 'http://127.0.0.1:8545',
    });
    const second = await chains.list(admin, true);
    expect(second.map((c) => c.id).filter((id) => first.some((f) => f.id === id))).toHaveLength(first.length);
    expect(second.find((c) => c.name === 'ethereum')?.rpcUrl).toBe('https://eth.example/v3/key');
    expect(second.find((c) => c.name === 'polygon')?.isEnabled).toBe(false);
    expect(second.find((c) => c.name === 'anvil')).toMatchObject({
      chainId: 31337n,
      isEnabled: true,
      isTestnet: true,
    });

    // A disabled local chain comes back enabled at the next start, at its new URL.
    await chains.update(admin, 'anvil', { isEnabled: false });
    await chains.bootstrap({ rpcUrls: '', localRpcUrl: 'http://127.0.0.1:9545' });
    expect(await chains.get(admin, '31337')).toMatchObject({
      rpcUrl: 'http://127.0.0.1:9545',
      isEnabled: true,
    });
  });

  it('hides disabled chains from users and refuses them to keys, naming the field', async () => {
    const someone = user(false);
    expect((await chains.list(someone, false)).some((c) => c.name === 'polygon')).toBe(false);
    await expect(chains.get(someone, 'polygon')).rejects.toBeInstanceOf(NotFoundError);
    await expect(chains.resolve('polygon', 'chain')).rejects.toMatchObject({ field: 'chain' });
    await expect(chains.resolve('polygon', 'chain', true)).resolves.toMatchObject({ name: 'polygon' });
    await expect(chains.resolve('nope', 'chain')).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(chains.list(someone, true)).rejects.toBeInstanceOf(PermissionDeniedError);
  });

  it('lets only platform admins add chains; a taken name or family+chain_id is 409, decided by the database', async () => {
    const req = {
      name: 'linea',
      displayName: 'Linea',
      chainId: '59144',
      family: '',
      rpcUrl: '',
      wsUrl: '',
      explorerUrl: '',
      nativeCurrency: '',
      isTestnet: false,
    };
    await expect(chains.create(user(false), req)).rejects.toBeInstanceOf(PermissionDeniedError);
    const results = await Promise.allSettled(
      Array.from({ length: 5 }, (_, i) => chains.create(admin, { ...req, name: `linea-${i}` })),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results.filter((x) => x.status === 'rejected')) {
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(ConflictError);
    }
    await expect(
      chains.create(admin, { ...req, name: 'ethereum', chainId: '777777' }),
    ).rejects.toBeInstanceOf(ConflictError);
    // The same number in another family is a different chain.
    await expect(chains.create(admin, { ...req, name: 'linea-tron', family: 'tron' })).resolves.toMatchObject(
      {
        family: 'tron',
        nativeCurrency: 'TRX',
      },
    );
    expect((await chains.get(admin, '59144')).family).toBe('evm');
  });
});
