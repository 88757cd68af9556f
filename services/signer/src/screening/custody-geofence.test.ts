import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Principal } from '@custos/auth';
import { CustosError, type Database, type Logger, runWithRequestContext } from '@custos/service-kit';
import { type CountryResponse, open } from 'maxmind';
import { countryMmdb } from '../../test/mmdb-writer.js';
import { CustodyGeofence, headerRegionOf, parseRegions, regionOfRecord } from './custody-geofence.js';

// Custody geofencing on a GeoIP database written here (test/mmdb-writer.ts, read back with the
// `maxmind` reader signer uses) and in header mode: a server key from a geofenced region is 403
// `custody_geofenced` after its `custody.geofenced` record; other regions, other custodies and
// (by default) unknown regions pass.

const ORG = '22222222-2222-4222-8222-222222222222';
const AGENT = '11111111-1111-4111-8111-111111111111';
const admin = { kind: 'user', userId: 'u', orgId: ORG, role: 'admin' } as unknown as Principal;
const logger = { info() {}, warn() {}, error() {}, debug() {} } as unknown as Logger;

const NETWORKS = { '175.45.176.0/22': 'KP', '5.160.0.0/16': 'IR', '8.8.8.0/24': 'US' };

function auditDb() {
  const records: { action: string; metadata: Record<string, unknown>; clientIp: unknown }[] = [];
  const tx = {
    insert: () => ({
      values: async (v: { name: string; payload: Record<string, unknown> }) => {
        if (v.name === 'audit.recorded') {
          records.push({
            action: v.payload['action'] as string,
            metadata: v.payload['metadata'] as Record<string, unknown>,
            clientIp: v.payload['client_ip'],
          });
        }
      },
    }),
  };
  const db = { transaction: async (fn: (t: unknown) => unknown) => fn(tx) } as unknown as Database;
  return { db, records };
}

let dir: string;
let mmdb: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'geofence-'));
  mmdb = path.join(dir, 'country.mmdb');
  await writeFile(mmdb, countryMmdb(NETWORKS));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

describe('the test GeoIP database', () => {
  it('reads back with the maxmind reader: each network its country, other addresses nothing', async () => {
    const r = await open<CountryResponse>(mmdb);
    expect(regionOfRecord(r.get('175.45.178.1'))).toBe('KP');
    expect(regionOfRecord(r.get('175.45.176.0'))).toBe('KP');
    expect(regionOfRecord(r.get('175.45.180.1'))).toBeUndefined();
    expect(regionOfRecord(r.get('5.160.200.7'))).toBe('IR');
    expect(regionOfRecord(r.get('8.8.8.8'))).toBe('US');
    expect(r.get('10.0.0.1')).toBeNull();
    expect(r.metadata.databaseType).toBe('Custos-Test-Country');
  });
});

describe('parsing', () => {
  it('parseRegions uppercases, dedupes and refuses what is not an alpha-2 code', () => {
    expect(parseRegions([' kp', 'IR', 'ir'])).toEqual(['KP', 'IR']);
    expect(() => parseRegions(['IRN'])).toThrow('ISO 3166-1 alpha-2');
  });
  it('headerRegionOf reads an alpha-2 code; XX (unknown) and junk are unknown', () => {
    expect(headerRegionOf(' ir ')).toBe('IR');
    expect(headerRegionOf('XX')).toBeUndefined();
    expect(headerRegionOf('')).toBeUndefined();
    expect(headerRegionOf(undefined)).toBeUndefined();
    expect(headerRegionOf('Iran')).toBeUndefined();
  });
});

describe('CustodyGeofence (geoip)', () => {
  async function rig(unknown: 'allow' | 'deny' = 'allow') {
    const a = auditDb();
    const g = new CustodyGeofence({
      regions: ['KP', 'IR'],
      source: 'geoip',
      geoipDatabase: mmdb,
      unknown,
      db: a.db,
      logger,
    });
    await g.start();
    return { g, records: a.records };
  }

  it('refuses a server key from a geofenced region: 403 custody_geofenced after its audit record', async () => {
    const { g, records } = await rig();
    // The client IP comes from the request context, as the gateway forwards it.
    const err = await runWithRequestContext({ requestId: 'r1', clientIp: '175.45.178.1' }, () =>
      g.check(admin, AGENT, 'server').catch((e: unknown) => e),
    );
    expect(err).toBeInstanceOf(CustosError);
    const e = err as CustosError;
    expect([e.httpStatus, e.type, e.field, e.extensions]).toEqual([
      403,
      'custody_geofenced',
      'custody',
      { region: 'KP' },
    ]);
    expect(records).toEqual([
      {
        action: 'custody.geofenced',
        metadata: { region: 'KP', source: 'geoip', custody: 'server' },
        clientIp: '175.45.178.1',
      },
    ]);
  });

  it('lets other regions, other custodies and unknown addresses through, with no record', async () => {
    const { g, records } = await rig();
    await expect(g.check(admin, AGENT, 'server', { clientIp: '8.8.8.8' })).resolves.toBeUndefined();
    await expect(g.check(admin, AGENT, 'client_tss', { clientIp: '5.160.1.1' })).resolves.toBeUndefined();
    await expect(g.check(admin, AGENT, 'server', { clientIp: '10.1.2.3' })).resolves.toBeUndefined();
    await expect(g.check(admin, AGENT, 'server', { clientIp: '::1' })).resolves.toBeUndefined();
    await expect(g.check(admin, AGENT, 'server', {})).resolves.toBeUndefined();
    expect(records).toEqual([]);
  });

  it('with CUSTODY_GEOFENCE_UNKNOWN=deny refuses an unknown region too (region `unknown`)', async () => {
    const { g, records } = await rig('deny');
    const e = (await g
      .check(admin, AGENT, 'server', { clientIp: '10.1.2.3' })
      .catch((x: unknown) => x)) as CustosError;
    expect([e.httpStatus, e.type, e.extensions]).toEqual([403, 'custody_geofenced', { region: 'unknown' }]);
    expect(records.map((r) => r.metadata)).toEqual([
      { region: 'unknown', source: 'geoip', custody: 'server' },
    ]);
    await expect(g.check(admin, AGENT, 'server', { clientIp: '8.8.8.8' })).resolves.toBeUndefined();
  });

  it('does not start in geoip mode without a database, or with a file that is not one', async () => {
    const base = { regions: ['KP'], source: 'geoip' as const, unknown: 'allow' as const, logger };
    await expect(new CustodyGeofence(base).start()).rejects.toThrow('CUSTODY_GEOIP_DATABASE');
    const bad = path.join(dir, 'bad.mmdb');
    await writeFile(bad, 'not a database');
    await expect(new CustodyGeofence({ ...base, geoipDatabase: bad }).start()).rejects.toThrow();
  });

  it('with no region configured checks nothing (and needs no database)', async () => {
    const g = new CustodyGeofence({ regions: [], source: 'geoip', unknown: 'deny', logger });
    await g.start();
    expect(g.enabled).toBe(false);
    await expect(g.check(admin, AGENT, 'server', { clientIp: '175.45.178.1' })).resolves.toBeUndefined();
  });
});

describe('CustodyGeofence (header)', () => {
  it('takes the region the gateway read from the trusted header, not the IP', async () => {
    const a = auditDb();
    const g = new CustodyGeofence({ regions: ['IR'], source: 'header', unknown: 'allow', db: a.db, logger });
    await g.start();
    const e = (await g
      .check(admin, AGENT, 'server', { clientIp: '8.8.8.8', headerRegion: 'ir' })
      .catch((x: unknown) => x)) as CustosError;
    expect([e.httpStatus, e.type, e.extensions]).toEqual([403, 'custody_geofenced', { region: 'IR' }]);
    expect(a.records.map((r) => r.metadata)).toEqual([{ region: 'IR', source: 'header', custody: 'server' }]);
    await expect(
      g.check(admin, AGENT, 'server', { clientIp: '5.160.1.1', headerRegion: 'DE' }),
    ).resolves.toBeUndefined();
    await expect(g.check(admin, AGENT, 'server', { headerRegion: '' })).resolves.toBeUndefined();
  });
});

describe('the e2e GeoIP fixture (tools/e2e/fixtures/geoip-country-test.mmdb)', () => {
  // Regenerate it with WRITE_GEOIP_FIXTURE=1 pnpm exec jest src/screening/custody-geofence.test.ts.
  const E2E_NETWORKS = { '175.45.176.0/22': 'KP', '5.160.0.0/16': 'IR', '8.8.8.0/24': 'US' };
  const E2E_EPOCH = 1_795_000_000;
  const fixture = path.join(__dirname, '../../../../tools/e2e/fixtures/geoip-country-test.mmdb');

  it('is exactly what the writer makes of its networks', async () => {
    if (process.env['WRITE_GEOIP_FIXTURE'] === '1')
      await writeFile(fixture, countryMmdb(E2E_NETWORKS, E2E_EPOCH));
    expect((await readFile(fixture)).equals(countryMmdb(E2E_NETWORKS, E2E_EPOCH))).toBe(true);
    const r = await open<CountryResponse>(fixture);
    expect(regionOfRecord(r.get('175.45.178.9'))).toBe('KP');
  });
});
