import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Principal } from '@custos/auth';
import {
  type CustosError,
  createDatabase,
  createLogger,
  createPool,
  migrateSchema,
  runWithRequestContext,
} from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { SCHEMA } from '../src/db/schema';
import { CustodyGeofence } from '../src/screening/custody-geofence';
import { SanctionsScreen } from '../src/screening/sanctions-screen';
import { countryMmdb } from './mmdb-writer';

const logger = createLogger({ service: 'signer-test', level: 'silent' });

// Screening's audit records in Postgres: `sanctions.blocked` and `custody.geofenced` are written to
// signer's outbox (the way to the audit service) before the 403, with what they must say and
// nothing else; a refusal that answers 503 (stale list) writes nothing.
describe('screening audit records in Postgres', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let dir: string;
  const EVM = '0x8589427373D6D84E98730D7795D8f6f8731FDA16';

  beforeAll(async () => {
    database = await createTestDatabase('custos_signer');
    pool = createPool(database.url, 4, logger, 'signer-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    dir = await mkdtemp(path.join(tmpdir(), 'screening-spec-'));
  });
  afterAll(async () => {
    await pool?.end();
    await database?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function records(
    orgId: string,
  ): Promise<{ action: string; metadata: unknown; client_ip: unknown }[]> {
    const r = await pool.query<{ payload: { action: string; metadata: unknown; client_ip: unknown } }>(
      `select payload from ${SCHEMA}.outbox where name = 'audit.recorded' and org_id = $1 order by seq`,
      [orgId],
    );
    return r.rows.map((x) => ({
      action: x.payload.action,
      metadata: x.payload.metadata,
      client_ip: x.payload.client_ip,
    }));
  }

  it('deny: sanctions.blocked is in the outbox (list, chain, family, address) before the 403', async () => {
    const orgId = randomUUID();
    const agentId = randomUUID();
    const agent = { kind: 'agent', agentId, orgId } as unknown as Principal;
    const file = path.join(dir, 'fresh.json');
    await writeFile(
      file,
      JSON.stringify({ name: 'test-sdn', published_at: new Date().toISOString(), addresses: { ETH: [EVM] } }),
    );
    const s = new SanctionsScreen({
      source: { file, format: 'auto', name: 'x', timeoutMs: 1000 },
      logger,
      db: createDatabase(pool),
    });
    await s.refresh();
    const err = (await s
      .screen(agent, agentId, 'deny', { family: 'evm', chain: 'anvil', to: [EVM.toLowerCase()] })
      .catch((e: unknown) => e)) as CustosError;
    expect([err.httpStatus, err.type, err.extensions]).toEqual([
      403,
      'sanctions_blocked',
      { list: 'test-sdn' },
    ]);
    expect(await records(orgId)).toEqual([
      {
        action: 'sanctions.blocked',
        metadata: { list: 'test-sdn', chain: 'anvil', family: 'evm', address: EVM.toLowerCase() },
        client_ip: null,
      },
    ]);
  });

  it('a stale list is 503 and writes nothing', async () => {
    const orgId = randomUUID();
    const agentId = randomUUID();
    const agent = { kind: 'agent', agentId, orgId } as unknown as Principal;
    const file = path.join(dir, 'old.json');
    const eightDaysAgo = new Date(Date.now() - 8 * 24 * 3600 * 1000);
    await writeFile(
      file,
      JSON.stringify({
        name: 'old-sdn',
        published_at: eightDaysAgo.toISOString(),
        addresses: { ETH: [EVM] },
      }),
    );
    const s = new SanctionsScreen({
      source: { file, format: 'auto', name: 'x', timeoutMs: 1000 },
      logger,
      db: createDatabase(pool),
    });
    await s.refresh();
    const err = (await s
      .screen(agent, agentId, 'deny', { family: 'evm', chain: 'anvil', to: EVM })
      .catch((e: unknown) => e)) as CustosError;
    expect([err.httpStatus, err.type, err.extensions]).toEqual([
      503,
      'sanctions_list_stale',
      { list: 'old-sdn' },
    ]);
    expect(await records(orgId)).toEqual([]);
  });

  it('custody.geofenced is in the outbox with the region, and the client IP in the record, before the 403', async () => {
    const orgId = randomUUID();
    const agentId = randomUUID();
    const admin = { kind: 'user', userId: randomUUID(), orgId, role: 'owner' } as unknown as Principal;
    const db = path.join(dir, 'country.mmdb');
    await writeFile(db, countryMmdb({ '175.45.176.0/22': 'KP' }));
    const g = new CustodyGeofence({
      regions: ['KP'],
      source: 'geoip',
      geoipDatabase: db,
      unknown: 'allow',
      db: createDatabase(pool),
      logger,
    });
    await g.start();
    const err = (await runWithRequestContext({ requestId: randomUUID(), clientIp: '175.45.177.3' }, () =>
      g.check(admin, agentId, 'server').catch((e: unknown) => e),
    )) as CustosError;
    expect([err.httpStatus, err.type]).toEqual([403, 'custody_geofenced']);
    expect(await records(orgId)).toEqual([
      {
        action: 'custody.geofenced',
        metadata: { region: 'KP', source: 'geoip', custody: 'server' },
        client_ip: '175.45.177.3',
      },
    ]);
  });
});
