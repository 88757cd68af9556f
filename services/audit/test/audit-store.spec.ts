import { randomBytes, randomUUID } from 'node:crypto';
import { type Database, createLogger, serviceRoleName } from '@custos/service-kit';
import { AuditService } from '../src/chain/audit-service';
import { AuditStore } from '../src/chain/audit-store';
import { auditRecordedConsumer, recordFromEvent } from '../src/events/audit-recorded-consumer';
import { auditTestDatabase, owner } from './audit-test-db';

const logger = createLogger({ service: 'audit-test', level: 'silent' });
const key = randomBytes(32);
const ROLE = serviceRoleName('audit');

describe('the audit chain in Postgres', () => {
  let adminPool: Awaited<ReturnType<typeof auditTestDatabase>>['adminPool'];
  let writerPool: Awaited<ReturnType<typeof auditTestDatabase>>['writerPool'];
  let close: () => Promise<void>;
  let db: Database;
  let service: AuditService;

  beforeAll(async () => {
    ({ adminPool, writerPool, db, close } = await auditTestDatabase('custos_audit', logger, 8));
    service = new AuditService(new AuditStore(db, key), key, logger);
  });
  afterAll(() => close?.());

  async function append(orgId: string, n: number): Promise<string[]> {
    const store = new AuditStore(db, key);
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const row = await store.appendNow({
        id: randomUUID(),
        orgId,
        actorType: 'user',
        actorId: randomUUID(),
        action: 'secret.read',
        resourceType: 'secret',
        resourceId: `p/${i}`,
        metadata: { version: i + 1, ip_address: '192.0.2.7' },
        createdAt: new Date(),
      });
      ids.push(row.id);
    }
    return ids;
  }

  it('runs as a role that can insert and read records but never update, delete, truncate or unguard them', async () => {
    const orgId = randomUUID();
    const [id] = await append(orgId, 1);
    const c = await writerPool.connect();
    try {
      expect((await c.query('SELECT current_user AS u')).rows[0].u).toBe(ROLE);
      await expect(c.query(`UPDATE audit.events SET action = 'x.y' WHERE id = $1`, [id])).rejects.toThrow(
        /permission denied/,
      );
      await expect(c.query(`DELETE FROM audit.events WHERE id = $1`, [id])).rejects.toThrow(
        /permission denied/,
      );
      await expect(c.query(`TRUNCATE audit.events`)).rejects.toThrow(/permission denied/);
      await expect(c.query(`ALTER TABLE audit.events DISABLE TRIGGER events_append_only`)).rejects.toThrow(
        /must be owner/,
      );
    } finally {
      c.release();
    }
    // Even the owner of the table (the migrating user) is refused by the append-only trigger.
    await expect(
      adminPool.query(`UPDATE audit.events SET action = 'x.y' WHERE id = $1`, [id]),
    ).rejects.toThrow(/append-only/);
    await expect(adminPool.query(`DELETE FROM audit.events WHERE id = $1`, [id])).rejects.toThrow(
      /append-only/,
    );
    expect((await service.verify(owner(orgId))).chainValid).toBe(true);
  });

  it('parallel appends of one org form one gapless chain', async () => {
    const orgId = randomUUID();
    const store = new AuditStore(db, key);
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        store.appendNow({
          id: randomUUID(),
          orgId,
          actorType: 'agent',
          actorId: 'a',
          action: 'secret.read',
          resourceType: 'secret',
          resourceId: String(i),
          metadata: {},
          createdAt: new Date(),
        }),
      ),
    );
    const result = await service.verify(owner(orgId));
    expect(result).toMatchObject({ chainValid: true, eventsChecked: 40, eventsVerified: 40 });
    expect(result.broken).toBeUndefined();
    const listed = await service.list(owner(orgId), { limit: 1000, offset: 0 });
    expect(listed.count).toBe(40);
    expect(listed.events.map((e) => e.sequence)).toEqual(Array.from({ length: 40 }, (_, i) => 40 - i));
  });

  it('names the first broken record after tampering (edit, delete, reorder)', async () => {
    const tamper = async (q: string, params: unknown[]) => {
      const c = await adminPool.connect();
      try {
        // A superuser skipping triggers: what an attacker with database access could do.
        await c.query('SET session_replication_role = replica');
        await c.query(q, params);
      } finally {
        await c.query('RESET session_replication_role');
        c.release();
      }
    };
    const edited = randomUUID();
    let ids = await append(edited, 5);
    await tamper(`UPDATE audit.events SET metadata = '{"version": 9}' WHERE id = $1`, [ids[2]]);
    expect(await service.verify(owner(edited))).toMatchObject({
      chainValid: false,
      broken: { eventId: ids[2], reason: 'hmac_mismatch' },
    });

    const deleted = randomUUID();
    ids = await append(deleted, 5);
    await tamper(`DELETE FROM audit.events WHERE id = $1`, [ids[1]]);
    expect(await service.verify(owner(deleted))).toMatchObject({
      chainValid: false,
      broken: { eventId: ids[2], reason: 'sequence_gap' },
    });

    const reordered = randomUUID();
    ids = await append(reordered, 5);
    // Swap positions 2 and 4 (through a placeholder: (org, seq) is unique).
    await tamper(`UPDATE audit.events SET seq = -2 WHERE id = $1`, [ids[1]]);
    await tamper(`UPDATE audit.events SET seq = 2 WHERE id = $1`, [ids[3]]);
    await tamper(`UPDATE audit.events SET seq = 4 WHERE id = $1`, [ids[1]]);
    expect(await service.verify(owner(reordered))).toMatchObject({
      chainValid: false,
      broken: { eventId: ids[3], reason: 'link_mismatch' },
    });

    const truncated = randomUUID();
    ids = await append(truncated, 4);
    await tamper(`DELETE FROM audit.events WHERE id = $1`, [ids[3]]);
    expect(await service.verify(owner(truncated))).toMatchObject({
      chainValid: false,
      broken: { eventId: ids[2], reason: 'head_mismatch' },
    });
  });

  it('refuses members and agents, and bad list parameters by name', async () => {
    const orgId = randomUUID();
    const member = { ...owner(orgId), role: 'member' } as Principal;
    await expect(service.list(member, { limit: 10, offset: 0 })).rejects.toThrow(/owners and admins/);
    await expect(service.verify(member)).rejects.toThrow(/owners and admins/);
    await expect(service.list(owner(orgId), { limit: 1001, offset: 0 })).rejects.toMatchObject({
      field: 'limit',
    });
    await expect(service.list(owner(orgId), { limit: 10, offset: -1 })).rejects.toMatchObject({
      field: 'offset',
    });
    await expect(
      service.list(owner(orgId), { limit: 10, offset: 0, action: 'DROP TABLE' }),
    ).rejects.toMatchObject({
      field: 'action',
    });
  });

  it('records a direct action about the caller only, screening its details for secrets', async () => {
    const orgId = randomUUID();
    const p = owner(orgId);
    const input = { action: 'ip_rule.denied', resourceType: 'route', resourceId: 'GET /v1/vaults' };
    const id = await service.record(p, { ...input, details: { reason: 'blocked', ip_address: 'forged' } });
    const [e] = (await service.list(p, { limit: 10, offset: 0 })).events;
    expect(e).toMatchObject({
      id,
      orgId,
      actorType: 'user',
      actorId: (p as { userId: string }).userId,
      resourceId: 'GET /v1/vaults',
      sequence: 1,
    });
    // No request context here: a caller's own ip_address never stands in for the real one.
    expect(e!.details).toEqual({ reason: 'blocked' });
    expect(e!.ipAddress).toBeNull();
    await expect(service.record(p, { ...input, details: { token: 'x' } })).rejects.toMatchObject({
      field: 'metadata',
    });
    await expect(service.record(p, { ...input, action: 'secret.read', details: {} })).rejects.toMatchObject({
      field: 'action',
    });
    expect((await service.verify(p)).chainValid).toBe(true);
  });

  it('chains what the audit.recorded consumer decodes, and refuses a malformed record loudly', async () => {
    const orgId = randomUUID();
    const handle = auditRecordedConsumer({ audit: service, logger, refused: { inc: () => undefined } });
    const fromVaultCrypto = { subject: 'p.audit.recorded.vault-crypto', producer: 'vault-crypto' };
    const data = {
      org_id: orgId,
      actor_type: 'agent',
      actor_id: 'a1',
      action: 'secret.read',
      resource_type: 'secret',
      resource_id: 's1',
      metadata: { path: 'p', request_id: 'forged' },
      client_ip: '192.0.2.9',
      request_id: 'req-1',
      occurred_at: new Date().toISOString(),
    };
    const envelope = (d: Record<string, unknown>) =>
      ({ id: randomUUID(), type: 'audit.recorded', created_at: '', org_id: orgId, data: d }) as never;
    await db.transaction((tx) => handle(envelope(data), tx, fromVaultCrypto));
    const [e] = (await service.list(owner(orgId), { limit: 10, offset: 0 })).events;
    expect(e).toMatchObject({
      actorType: 'agent',
      ipAddress: '192.0.2.9',
      requestId: 'req-1',
      details: { path: 'p', ip_address: '192.0.2.9', request_id: 'req-1' },
    });
    for (const bad of [{ org_id: 'x' }, { action: 'DROP' }, { metadata: [] }, { occurred_at: 'soon' }]) {
      expect(() => recordFromEvent(envelope({ ...data, ...bad }), 'vault-crypto')).toThrow(/malformed/);
    }
  });
  it('counts the org’s would-deny records since a time by reason_code, for owners and admins only', async () => {
    const orgId = randomUUID();
    const store = new AuditStore(db, key);
    const now = Date.now();
    const record = (action: string, metadata: Record<string, unknown>, ageMs = 0, org = orgId) =>
      store.appendNow({
        id: randomUUID(),
        orgId: org,
        actorType: 'agent',
        actorId: randomUUID(),
        action,
        resourceType: 'agent',
        resourceId: randomUUID(),
        metadata,
        createdAt: new Date(now - ageMs),
      });
    for (const reason of ['tx_max_value', 'tx_max_value', 'tx_daily_limit', 'tx_max_value'])
      await record('guardrail_shadow.would_deny', { reason_code: reason, chain: 'anvil' });
    await record('guardrail_shadow.would_deny', { chain: 'anvil' });
    // Not counted: before `since`, another org's, another action.
    await record('guardrail_shadow.would_deny', { reason_code: 'tx_max_value' }, 3_600_000);
    await record('guardrail_shadow.would_deny', { reason_code: 'tx_max_value' }, 0, randomUUID());
    await record('agent.transaction.refused', { reason_code: 'tx_max_value' });

    const report = await service.shadowReport(owner(orgId), new Date(now - 60_000));
    expect(report.total).toBe(5);
    expect(report.reasonCodes.map((r) => [r.reasonCode, r.count])).toEqual([
      ['tx_max_value', 3],
      ['tx_daily_limit', 1],
      ['unknown', 1],
    ]);
    expect(report.reasonCodes[0]!.lastAt.getTime()).toBeGreaterThanOrEqual(now - 1000);
    expect((await service.shadowReport(owner(orgId), new Date(now - 7_200_000))).total).toBe(6);
    expect((await service.shadowReport(owner(orgId), new Date(now + 60_000))).reasonCodes).toEqual([]);

    const member = { ...owner(orgId), role: 'member' } as Parameters<typeof service.shadowReport>[0];
    await expect(service.shadowReport(member, new Date(now - 60_000))).rejects.toMatchObject({
      kind: 'permission_denied',
    });
    await expect(service.shadowReport(owner(orgId), new Date('soon'))).rejects.toMatchObject({
      kind: 'invalid_argument',
      field: 'since',
    });
  });
});
