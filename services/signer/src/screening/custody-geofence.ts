import net from 'node:net';
import type { Principal } from '@custos/auth';
import { auditOf } from '@custos/events';
import {
  CustosError,
  type Database,
  type Logger,
  PermissionDeniedError,
  currentRequestContext,
  describeError,
} from '@custos/service-kit';
import { type CountryResponse, type Reader, open } from 'maxmind';
import { failClosed, writeSignerAudit } from '../audit/signer-audit.js';

/** Problem type of a refused key creation. */
export const GEOFENCED_TYPE = 'custody_geofenced';

/** Where a request's region comes from (CUSTODY_REGION_SOURCE). */
export type RegionSource = 'geoip' | 'header';

/** What the geofence knows of where a request comes from. */
export interface RequestOrigin {
  /** The client's address as the gateway resolved it (the request context's clientIp). */
  clientIp?: string | undefined;
  /** The region the gateway read from the trusted ingress header (header mode). */
  headerRegion?: string | undefined;
}

const ISO_REGION = /^[A-Z]{2}$/;

/** The ISO 3166-1 alpha-2 codes of CUSTODY_GEOFENCED_REGIONS, checked (uppercased). */
export function parseRegions(values: readonly string[]): string[] {
  const out = values.map((v) => v.trim().toUpperCase()).filter(Boolean);
  for (const r of out) {
    if (!ISO_REGION.test(r)) throw new Error(`"${r}" is not an ISO 3166-1 alpha-2 country code`);
  }
  return [...new Set(out)];
}

/** A region as a header gives it (`cf-ipcountry: ir`), uppercased; `XX`/`T1` (unknown, Tor) and junk are unknown. */
export function headerRegionOf(v: string | undefined): string | undefined {
  const r = (v ?? '').trim().toUpperCase();
  return ISO_REGION.test(r) && r !== 'XX' ? r : undefined;
}

/** The country of an address in a GeoIP2/GeoLite2 Country or City database (else its registered country). */
export function regionOfRecord(rec: CountryResponse | null | undefined): string | undefined {
  const code = rec?.country?.iso_code ?? rec?.registered_country?.iso_code;
  return code && ISO_REGION.test(code.toUpperCase()) ? code.toUpperCase() : undefined;
}

/**
 * Custody geofencing (issue 20): creating a `server`-custody key from a client in a geofenced
 * region is refused (403 `custody_geofenced`, audit `custody.geofenced` with the region and how it
 * was known; the audit record's own client_ip column holds the address, as for every record). The
 * region is read from a GeoIP database (the `maxmind` reader, reloaded when the file changes) on the
 * client IP the gateway forwards, or from the region the gateway read in a trusted ingress header.
 * A request whose region is unknown (a private address, no database entry, no header) passes unless
 * CUSTODY_GEOFENCE_UNKNOWN is `deny`.
 */
export class CustodyGeofence {
  private reader: Reader<CountryResponse> | undefined;

  constructor(
    private readonly deps: {
      regions: readonly string[];
      source: RegionSource;
      /** The GeoIP2/GeoLite2 Country or City database (geoip mode). */
      geoipDatabase?: string | undefined;
      unknown: 'allow' | 'deny';
      db?: Database;
      logger: Logger;
    },
  ) {}

  /** True when some region is geofenced. */
  get enabled(): boolean {
    return this.deps.regions.length > 0;
  }

  /** Opens the GeoIP database (geoip mode with regions set); a missing or bad file fails the start. */
  async start(): Promise<void> {
    if (!this.enabled || this.deps.source !== 'geoip') return;
    if (!this.deps.geoipDatabase) {
      throw new Error('CUSTODY_GEOFENCED_REGIONS is set in geoip mode but CUSTODY_GEOIP_DATABASE is not');
    }
    this.reader = await open<CountryResponse>(this.deps.geoipDatabase, {
      watchForUpdates: true,
      watchForUpdatesNonPersistent: true,
    });
    this.deps.logger.info(
      { regions: this.deps.regions, source: 'geoip', database_type: this.reader.metadata.databaseType },
      'custody geofencing on',
    );
  }

  /** Stops watching the database file. */
  stop(): void {
    this.reader = undefined;
  }

  /** The request's region, as the configured source knows it (undefined: unknown). */
  regionOf(o: RequestOrigin): string | undefined {
    if (this.deps.source === 'header') return headerRegionOf(o.headerRegion);
    const ip = (o.clientIp ?? '').trim();
    if (!this.reader || net.isIP(ip) === 0) return undefined;
    try {
      return regionOfRecord(this.reader.get(ip));
    } catch (err) {
      this.deps.logger.warn({ err: describeError(err) }, 'GeoIP lookup failed; the region is unknown');
      return undefined;
    }
  }

  /**
   * Refuses a `server`-custody key creation from a geofenced region (audited first, fail-closed).
   * `origin` defaults to the current request's client IP; other custodies are not geofenced.
   */
  async check(
    p: Principal,
    agentId: string,
    custody: string,
    origin: RequestOrigin = { clientIp: currentRequestContext()?.clientIp },
  ): Promise<void> {
    if (!this.enabled || custody !== 'server') return;
    const region = this.regionOf(origin);
    const fenced = region === undefined ? this.deps.unknown === 'deny' : this.deps.regions.includes(region);
    if (!fenced) return;
    const shown = region ?? 'unknown';
    const db = this.deps.db;
    if (!db) throw new CustosError('unavailable', { detail: 'geofencing has no database to audit with' });
    const record = auditOf(
      p,
      'custody.geofenced',
      { type: 'agent', id: agentId },
      { region: shown, source: this.deps.source, custody },
    );
    await failClosed(this.deps.logger, record.action, () =>
      db.transaction((tx) => writeSignerAudit(tx, record)),
    );
    throw new PermissionDeniedError(
      region === undefined
        ? 'server custody keys are not created from a request whose region is unknown'
        : `server custody keys are not created from region ${region}`,
      { type: GEOFENCED_TYPE, field: 'custody', extensions: { region: shown } },
    );
  }
}
