import { mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Principal } from '@custos/auth';
import { CustosError, type Database, type Logger } from '@custos/service-kit';
import { SANCTIONS_MAX_AGE_MS, SanctionsScreen, sanctionsApprovalMatch } from './sanctions-screen.js';

// SanctionsScreen against a list served by a local HTTP server and a list file: loading,
// refreshing (a failed refresh keeps the previous list), staleness from the list's own time (503
// past seven days), a missing list (503), and the policy modes (`deny` audits and refuses 403
// naming the list, `approve` hands the hit back, `off` screens nothing).

const ORG = '22222222-2222-4222-8222-222222222222';
const AGENT = '11111111-1111-4111-8111-111111111111';
const EVM = '0x8589427373D6D84E98730D7795D8f6f8731FDA16';
const BTC = 'bc1qsxdxe2yuz4ttmh5xc3xyzcmtd2z4ra5gnpnq2z';
const CLEAN = '0x' + '11'.repeat(20);
const agent = { kind: 'agent', agentId: AGENT, orgId: ORG } as unknown as Principal;

function quietLogger() {
  const lines: { level: string; obj: Record<string, unknown>; msg: string }[] = [];
  const log = (level: string) => (obj: Record<string, unknown>, msg: string) =>
    lines.push({ level, obj, msg });
  return {
    lines,
    logger: { info: log('info'), warn: log('warn'), error: log('error'), debug() {} } as unknown as Logger,
  };
}

function auditDb() {
  const records: { action: string; metadata: Record<string, unknown> }[] = [];
  const tx = {
    insert: () => ({
      values: async (v: { name: string; payload: Record<string, unknown> }) => {
        if (v.name === 'audit.recorded') {
          records.push({
            action: v.payload['action'] as string,
            metadata: v.payload['metadata'] as Record<string, unknown>,
          });
        }
      },
    }),
  };
  const db = { transaction: async (fn: (t: unknown) => unknown) => fn(tx) } as unknown as Database;
  return { db, records };
}

const doc = (o: { name?: string; publishedAt?: Date; evm?: string[] }) =>
  JSON.stringify({
    ...(o.name ? { name: o.name } : {}),
    ...(o.publishedAt ? { published_at: o.publishedAt.toISOString() } : {}),
    addresses: { ETH: o.evm ?? [EVM], XBT: [BTC] },
  });

/** A local HTTP server answering the current `body` (or `status`), counting requests. */
async function listServer() {
  const state = { body: doc({ name: 'ofac-sdn' }), status: 200, hits: 0 };
  const server = http.createServer((_req, res) => {
    state.hits += 1;
    res.writeHead(state.status, { 'content-type': 'application/json' });
    res.end(state.status === 200 ? state.body : 'down');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/sdn.json`;
  return { state, url, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const expectUnavailable = (fn: () => unknown, type: string, list?: string) => {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(CustosError);
    const e = err as CustosError;
    expect([e.httpStatus, e.type]).toEqual([503, type]);
    if (list) expect(e.extensions).toEqual({ list });
    return;
  }
  throw new Error('expected a 503');
};

describe('SanctionsScreen over HTTP', () => {
  let srv: Awaited<ReturnType<typeof listServer>>;
  beforeEach(async () => {
    srv = await listServer();
  });
  afterEach(async () => srv.close());

  const screenAt = (clock: { now: Date }, logger = quietLogger().logger, db?: Database) =>
    new SanctionsScreen({
      source: { url: srv.url, format: 'auto', name: 'sanctions', timeoutMs: 2000 },
      logger,
      ...(db ? { db } : {}),
      now: () => clock.now,
    });

  it('loads the list, finds a listed recipient in any case, and passes a clean one', async () => {
    const clock = { now: new Date() };
    const s = screenAt(clock);
    expect(await s.refresh()).toBe(true);
    expect(s.check({ family: 'evm', chain: 'ethereum', to: EVM.toLowerCase() })).toEqual({
      hit: true,
      list: 'ofac-sdn',
      family: 'evm',
      chain: 'ethereum',
      address: EVM.toLowerCase(),
    });
    expect(s.check({ family: 'evm', chain: 'base', to: EVM.toUpperCase().replace('0X', '0x') }).hit).toBe(
      true,
    );
    expect(s.check({ family: 'bitcoin', chain: 'bitcoin', to: BTC.toUpperCase() }).hit).toBe(true);
    // Every recipient of the request is screened (the call's `to` and an ERC-20 transfer's recipient).
    expect(s.check({ family: 'evm', chain: 'ethereum', to: [CLEAN, EVM] }).hit).toBe(true);
    expect(s.check({ family: 'evm', chain: 'ethereum', to: CLEAN })).toEqual({
      hit: false,
      list: 'ofac-sdn',
    });
    // The same address on another family's list is not a hit.
    expect(s.check({ family: 'tron', chain: 'tron', to: EVM }).hit).toBe(false);
  });

  it('refreshes on its timer: a new version of the list replaces the old one', async () => {
    const s = screenAt({ now: new Date() });
    await s.start(50);
    try {
      expect(s.check({ family: 'evm', chain: 'e', to: CLEAN }).hit).toBe(false);
      srv.state.body = doc({ name: 'ofac-sdn', evm: [CLEAN] });
      const hitsBefore = srv.state.hits;
      const deadline = Date.now() + 5000;
      while (!s.check({ family: 'evm', chain: 'e', to: CLEAN }).hit && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(srv.state.hits).toBeGreaterThan(hitsBefore);
      expect(s.check({ family: 'evm', chain: 'e', to: CLEAN }).hit).toBe(true);
      expect(s.check({ family: 'evm', chain: 'e', to: EVM }).hit).toBe(false);
    } finally {
      await s.stop();
    }
  });

  it('keeps the previous list when a refresh fails (HTTP error, bad document), and logs no content', async () => {
    const { logger, lines } = quietLogger();
    const s = screenAt({ now: new Date() }, logger);
    await s.refresh();
    srv.state.status = 500;
    expect(await s.refresh()).toBe(false);
    srv.state.status = 200;
    srv.state.body = `{"addresses": {"ETH": ["${EVM}", "0xnot-an-address"]}}`;
    expect(await s.refresh()).toBe(false);
    expect(s.check({ family: 'evm', chain: 'e', to: EVM }).hit).toBe(true);
    const errors = lines.filter((l) => l.level === 'error');
    expect(errors.map((l) => l.obj['err'])).toEqual([
      'the list URL answered HTTP 500',
      'addresses.ETH[1]: not a evm address',
    ]);
    expect(JSON.stringify(errors)).not.toContain(EVM);
  });

  it('pauses (503 sanctions_list_stale, naming the list) once the publication is over seven days old', async () => {
    const published = new Date('2026-11-01T00:00:00Z');
    srv.state.body = doc({ name: 'ofac-sdn', publishedAt: published });
    const clock = { now: new Date(published.getTime() + SANCTIONS_MAX_AGE_MS - 1000) };
    const s = screenAt(clock);
    await s.refresh();
    expect(s.check({ family: 'evm', chain: 'e', to: CLEAN }).hit).toBe(false);
    clock.now = new Date(published.getTime() + SANCTIONS_MAX_AGE_MS + 1000);
    // Reloading the same old publication does not make it fresh: its own time decides.
    await s.refresh();
    expectUnavailable(
      () => s.check({ family: 'evm', chain: 'e', to: CLEAN }),
      'sanctions_list_stale',
      'ofac-sdn',
    );
    // A new publication lifts the pause.
    srv.state.body = doc({ name: 'ofac-sdn', publishedAt: clock.now });
    await s.refresh();
    expect(s.check({ family: 'evm', chain: 'e', to: EVM }).hit).toBe(true);
  });

  it('without a publication time, ages from the last successful fetch (a failing source goes stale)', async () => {
    const clock = { now: new Date('2026-11-10T00:00:00Z') };
    const s = screenAt(clock);
    await s.refresh();
    srv.state.status = 503;
    clock.now = new Date(clock.now.getTime() + SANCTIONS_MAX_AGE_MS + 1);
    await s.refresh();
    expectUnavailable(
      () => s.check({ family: 'evm', chain: 'e', to: CLEAN }),
      'sanctions_list_stale',
      'ofac-sdn',
    );
    srv.state.status = 200;
    await s.refresh();
    expect(s.check({ family: 'evm', chain: 'e', to: CLEAN }).hit).toBe(false);
  });

  it('is 503 sanctions_list_unavailable until a first load succeeds', async () => {
    srv.state.status = 404;
    const s = screenAt({ now: new Date() });
    await s.refresh();
    expectUnavailable(() => s.check({ family: 'evm', chain: 'e', to: EVM }), 'sanctions_list_unavailable');
  });
});

describe('SanctionsScreen from a file', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'sanctions-'));
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  it("ages a list without published_at from the file's modification time", async () => {
    const file = path.join(dir, 'list.json');
    await writeFile(file, doc({}));
    const old = new Date(Date.now() - SANCTIONS_MAX_AGE_MS - 60_000);
    await utimes(file, old, old);
    const s = new SanctionsScreen({
      source: { file, format: 'json', name: 'local-list', timeoutMs: 1000 },
      logger: quietLogger().logger,
    });
    expect(await s.refresh()).toBe(true);
    expect(s.status?.name).toBe('local-list');
    expectUnavailable(
      () => s.check({ family: 'evm', chain: 'e', to: EVM }),
      'sanctions_list_stale',
      'local-list',
    );
    await writeFile(file, doc({}));
    await s.refresh();
    expect(s.check({ family: 'evm', chain: 'e', to: EVM }).hit).toBe(true);
  });

  it('is 503 when no list is configured at all (fail closed)', () => {
    const s = new SanctionsScreen({ source: undefined, logger: quietLogger().logger });
    expect(s.configured).toBe(false);
    expectUnavailable(() => s.check({ family: 'evm', chain: 'e', to: EVM }), 'sanctions_list_unavailable');
  });
});

describe('SanctionsScreen.screen (address_screening_policy.mode)', () => {
  let dir: string;
  let file: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'sanctions-'));
    file = path.join(dir, 'list.json');
    await writeFile(file, doc({ name: 'ofac-sdn', publishedAt: new Date() }));
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  async function rig() {
    const a = auditDb();
    const s = new SanctionsScreen({
      source: { file, format: 'auto', name: 'x', timeoutMs: 1000 },
      logger: quietLogger().logger,
      db: a.db,
    });
    await s.refresh();
    return { s, records: a.records };
  }
  const req = { family: 'evm' as const, chain: 'anvil', to: EVM };

  it('`deny`: audits sanctions.blocked (list, chain, address) and refuses 403 sanctions_blocked naming the list', async () => {
    const { s, records } = await rig();
    const err = await s.screen(agent, AGENT, 'deny', req).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CustosError);
    const e = err as CustosError;
    expect([e.httpStatus, e.type, e.extensions]).toEqual([403, 'sanctions_blocked', { list: 'ofac-sdn' }]);
    expect(e.detail).toContain('ofac-sdn');
    expect(records).toEqual([
      {
        action: 'sanctions.blocked',
        metadata: { list: 'ofac-sdn', chain: 'anvil', family: 'evm', address: EVM.toLowerCase() },
      },
    ]);
  });

  it('`deny` with a clean recipient passes without a record', async () => {
    const { s, records } = await rig();
    expect(await s.screen(agent, AGENT, 'deny', { ...req, to: CLEAN })).toEqual({
      hit: false,
      list: 'ofac-sdn',
    });
    expect(records).toEqual([]);
  });

  it('`approve`: hands the hit back (for approvals) without refusing or auditing a block', async () => {
    const { s, records } = await rig();
    const r = await s.screen(agent, AGENT, 'approve', req);
    expect(r).toMatchObject({ hit: true, list: 'ofac-sdn', address: EVM.toLowerCase() });
    expect(records).toEqual([]);
    const match = sanctionsApprovalMatch(r as Extract<typeof r, { hit: true }>);
    expect(match.tier).toBe(3);
    expect(match.ruleJson).toEqual({
      reason: 'sanctions_hit',
      list: 'ofac-sdn',
      chain: 'anvil',
      address: EVM.toLowerCase(),
      risk_tier: 3,
    });
  });

  it('`off` and unset screen nothing, even with no list configured', async () => {
    const s = new SanctionsScreen({ source: undefined, logger: quietLogger().logger });
    expect(await s.screen(agent, AGENT, 'off', req)).toBeUndefined();
    expect(await s.screen(agent, AGENT, undefined, req)).toBeUndefined();
    expect(await s.screen(agent, AGENT, '', req)).toBeUndefined();
  });

  it('`deny` or `approve` with no list configured is 503, nothing decided', async () => {
    const s = new SanctionsScreen({ source: undefined, logger: quietLogger().logger });
    for (const mode of ['deny', 'approve']) {
      const e = (await s.screen(agent, AGENT, mode, req).catch((x: unknown) => x)) as CustosError;
      expect([e.httpStatus, e.type]).toEqual([503, 'sanctions_list_unavailable']);
    }
  });

  it('an unknown mode is treated as deny', async () => {
    const { s } = await rig();
    const e = (await s.screen(agent, AGENT, 'block', req).catch((x: unknown) => x)) as CustosError;
    expect(e.type).toBe('sanctions_blocked');
  });

  it('a block whose audit record cannot be written is 503 (fail closed)', async () => {
    const db = {
      transaction: async () => {
        throw new Error('outbox down');
      },
    } as unknown as Database;
    const s = new SanctionsScreen({
      source: { file, format: 'auto', name: 'x', timeoutMs: 1000 },
      logger: quietLogger().logger,
      db,
    });
    await s.refresh();
    const e = (await s.screen(agent, AGENT, 'deny', req).catch((x: unknown) => x)) as CustosError;
    expect(e.httpStatus).toBe(503);
  });
});
