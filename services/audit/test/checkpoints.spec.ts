import { randomBytes, randomUUID } from 'node:crypto';
import { type Database, createLogger } from '@custos/service-kit';
import { AuditService } from '../src/chain/audit-service';
import { AuditStore } from '../src/chain/audit-store';
import { checkpointSignatureValid, parseCheckpointKey } from '../src/checkpoints/checkpoint-fns';
import { CheckpointService } from '../src/checkpoints/checkpoint-service';
import { CheckpointStore } from '../src/checkpoints/checkpoint-store';
import { auditTestDatabase, owner } from './audit-test-db';

const logger = createLogger({ service: 'audit-test', level: 'silent' });
const hmacKey = randomBytes(32);
const signingKey = parseCheckpointKey(randomBytes(32).toString('base64'));

describe('audit checkpoints in Postgres', () => {
  let adminPool: Awaited<ReturnType<typeof auditTestDatabase>>['adminPool'];
  let writerPool: Awaited<ReturnType<typeof auditTestDatabase>>['writerPool'];
  let close: () => Promise<void>;
  let db: Database;
  let chain: AuditStore;
  let checkpoints: CheckpointService;

  beforeAll(async () => {
    ({ adminPool, writerPool, db, close } = await auditTestDatabase('custos_audit_cp', logger));
    chain = new AuditStore(db, hmacKey);
    checkpoints = new CheckpointService(new CheckpointStore(db), chain, signingKey, logger);
  });
  afterAll(() => close?.());

  async function append(orgId: string, n: number): Promise<void> {
    for (let i = 0; i < n; i++)
      await chain.appendNow({
        id: randomUUID(),
        orgId,
        actorType: 'user',
        actorId: 'u',
        action: 'secret.read',
        resourceType: 'secret',
        resourceId: `p/${i}`,
        metadata: { i },
        createdAt: new Date(),
        producer: 'audit',
      });
  }

  it('signs a checkpoint of the head that verifies with the public key; records carry key version 1', async () => {
    const orgId = randomUUID();
    await append(orgId, 5);
    const c = await checkpoints.create(owner(orgId));
    expect(c).toMatchObject({ orgId, seq: 5, keyId: signingKey.keyId });
    expect(c.headHash).toBe((await chain.head(orgId))!.hash);
    expect(checkpointSignatureValid(signingKey.publicKey, c)).toBe(true);
    // The head has not moved: asking again returns the same checkpoint.
    expect((await checkpoints.create(owner(orgId))).id).toBe(c.id);
    expect(await checkpoints.check(owner(orgId), c.id)).toEqual({
      id: c.id,
      sequence: 5,
      signatureValid: true,
      recordMatches: true,
      headAtOrAfter: true,
    });
    const page = await checkpoints.exportPage(owner(orgId), { fromSequence: 1, limit: 2 });
    expect(page.records.map((r) => [r.sequence, r.keyVersion])).toEqual([
      [1, 1],
      [2, 1],
    ]);
    expect(page).toMatchObject({ headSequence: 5, nextSequence: 3 });
    const last = await checkpoints.exportPage(owner(orgId), { fromSequence: 5, limit: 2 });
    expect(last.records.map((r) => r.sequence)).toEqual([5]);
    expect(last.nextSequence).toBe(0);
  });

  it('checkpoints each org whose head moved since its last checkpoint, once', async () => {
    const a = randomUUID();
    const b = randomUUID();
    await append(a, 2);
    await append(b, 1);
    await checkpoints.checkpointMovedHeads();
    const listed = async (org: string) =>
      (await checkpoints.list(owner(org), { limit: 10, offset: 0 })).checkpoints;
    expect((await listed(a)).map((c) => c.seq)).toEqual([2]);
    expect((await listed(b)).map((c) => c.seq)).toEqual([1]);
    await checkpoints.checkpointMovedHeads();
    expect(await listed(a)).toHaveLength(1);
    await append(a, 1);
    await checkpoints.checkpointMovedHeads();
    expect((await listed(a)).map((c) => c.seq)).toEqual([3, 2]);
    expect(await listed(b)).toHaveLength(1);
    // Rounds in small batches reach every org.
    const many = Array.from({ length: 5 }, () => randomUUID());
    for (const org of many) await append(org, 1);
    await checkpoints.checkpointMovedHeads(2);
    for (const org of many) expect((await listed(org)).map((c) => c.seq)).toEqual([1]);
    // Another org's checkpoint is not visible.
    const [cpA] = await listed(a);
    await expect(checkpoints.check(owner(b), cpA!.id)).rejects.toThrow(/not found/);
  });

  it('a round ends and reaches every org while a busy org keeps moving between its batches', async () => {
    // The busy org sorts first and gets a record before every batch is read: without the org-id
    // cursor each batch of one would hold it again and the round would never reach the others.
    const busy = `00000000-0000-4000-8000-${randomBytes(6).toString('hex')}`;
    const quiet = Array.from({ length: 4 }, () => randomUUID());
    await append(busy, 1);
    for (const org of quiet) await append(org, 1);
    const store = new CheckpointStore(db);
    const movedHeads = store.movedHeads.bind(store);
    let batches = 0;
    store.movedHeads = async (after, limit) => {
      batches += 1;
      if (batches > 200) throw new Error('the round does not end');
      await append(busy, 1);
      return movedHeads(after, limit);
    };
    await new CheckpointService(store, chain, signingKey, logger).checkpointMovedHeads(1);
    const listed = async (org: string) =>
      (await checkpoints.list(owner(org), { limit: 10, offset: 0 })).checkpoints;
    for (const org of quiet) expect((await listed(org)).map((c) => c.seq)).toEqual([1]);
    expect(await listed(busy)).toHaveLength(1);
  });

  it('catches the last records deleted and the head rewound, which verify alone does not', async () => {
    const orgId = randomUUID();
    await append(orgId, 6);
    const c = await checkpoints.create(owner(orgId));
    // As the table owner, with the append-only trigger off for this one transaction.
    const client = await adminPool.connect();
    try {
      await client.query('BEGIN');
      await client.query('ALTER TABLE audit.events DISABLE TRIGGER events_append_only');
      await client.query('DELETE FROM audit.events WHERE org_id = $1 AND seq > 3', [orgId]);
      await client.query('ALTER TABLE audit.events ENABLE TRIGGER events_append_only');
      await client.query(
        `UPDATE audit.chain_heads h SET seq = 3, hash = e.integrity_hash FROM audit.events e
          WHERE h.org_id = $1 AND e.org_id = $1 AND e.seq = 3`,
        [orgId],
      );
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const audit = new AuditService(chain, hmacKey, logger);
    expect((await audit.verify(owner(orgId))).chainValid).toBe(true);
    expect(await checkpoints.check(owner(orgId), c.id)).toMatchObject({
      signatureValid: true,
      recordMatches: false,
      headAtOrAfter: false,
    });
  });

  it("the service's role cannot delete or change checkpoints, and the owner is refused by the trigger", async () => {
    const orgId = randomUUID();
    await append(orgId, 1);
    const c = await checkpoints.create(owner(orgId));
    await expect(writerPool.query('DELETE FROM audit.checkpoints WHERE id = $1', [c.id])).rejects.toThrow(
      /permission denied/,
    );
    await expect(
      writerPool.query(`UPDATE audit.checkpoints SET seq = 0 WHERE id = $1`, [c.id]),
    ).rejects.toThrow(/permission denied/);
    await expect(adminPool.query('DELETE FROM audit.checkpoints WHERE id = $1', [c.id])).rejects.toThrow(
      /append-only/,
    );
  });

  it('answers 503-style unavailable when no signing key is configured', async () => {
    const off = new CheckpointService(new CheckpointStore(db), chain, undefined, logger);
    const orgId = randomUUID();
    await append(orgId, 1);
    await expect(off.create(owner(orgId))).rejects.toThrow(/not configured/);
    expect(await off.checkpointMovedHeads()).toBe(0);
  });
});
