import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { ChainVerifier, GENESIS_HASH, type StoredRecord, canonicalJson, integrityHash } from './chain-fns';

const key = randomBytes(32);
const orgId = randomUUID();

function chain(n: number): StoredRecord[] {
  const out: StoredRecord[] = [];
  let prev = GENESIS_HASH;
  for (let i = 1; i <= n; i++) {
    const fields = {
      prevHash: prev,
      orgId,
      actorType: 'user',
      actorId: randomUUID(),
      action: 'secret.read',
      resourceType: 'secret',
      resourceId: `path/${i}`,
      metadata: { version: i, ip_address: '10.0.0.1' },
      createdAt: new Date(Date.UTC(2026, 10, 23, 12, 0, i)),
    };
    const hash = integrityHash(key, fields);
    out.push({ ...fields, id: randomUUID(), seq: i, integrityHash: hash });
    prev = hash;
  }
  return out;
}

function verify(
  records: StoredRecord[],
  head = { seq: records.length, hash: records.at(-1)!.integrityHash },
) {
  const v = new ChainVerifier(key);
  for (const r of records) if (!v.next(r)) break;
  v.finish(head);
  return v;
}

describe('canonicalJson', () => {
  it('sorts keys at every depth and drops no array entries', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: null }], c: 'x' } })).toBe(
      '{"a":{"c":"x","d":[3,{"y":null,"z":1}]},"b":1}',
    );
  });
  it('is what Postgres jsonb round trips (key order and spacing do not matter)', () => {
    expect(canonicalJson(JSON.parse('{ "b" : 2, "a" : 1 }'))).toBe(canonicalJson({ a: 1, b: 2 }));
  });
});

describe('integrityHash', () => {
  it('is HMAC-SHA256 over the canonical JSON array DECISIONS.md names', () => {
    const f = {
      prevHash: GENESIS_HASH,
      orgId,
      actorType: 'agent',
      actorId: 'a1',
      action: 'secret.read',
      resourceType: 'secret',
      resourceId: 'db/password',
      metadata: { version: 2 },
      createdAt: new Date('2026-11-23T10:00:00.123Z'),
    };
    const message = JSON.stringify([
      GENESIS_HASH,
      orgId,
      'agent',
      'a1',
      'secret.read',
      { id: 'db/password', type: 'secret' },
      { version: 2 },
      '2026-11-23T10:00:00.123Z',
    ]);
    expect(integrityHash(key, f)).toBe(createHmac('sha256', key).update(message).digest('hex'));
    expect(integrityHash(randomBytes(32), f)).not.toBe(integrityHash(key, f));
  });
});

describe('ChainVerifier', () => {
  it('accepts an intact chain and an empty one', () => {
    const v = verify(chain(5));
    expect(v.broken).toBeUndefined();
    expect([v.checked, v.verified]).toEqual([5, 5]);
    const empty = new ChainVerifier(key);
    empty.finish(undefined);
    expect(empty.broken).toBeUndefined();
  });

  it('names an edited record (hmac)', () => {
    const records = chain(5);
    records[2] = { ...records[2]!, metadata: { version: 99 } };
    expect(verify(records).broken).toEqual({ id: records[2]!.id, seq: 3, reason: 'hmac_mismatch' });
  });

  it('names the record after a deleted one (sequence gap)', () => {
    const records = chain(5);
    const after = records[3]!;
    records.splice(2, 1);
    expect(verify(records).broken).toEqual({ id: after.id, seq: 4, reason: 'sequence_gap' });
  });

  it('names the first of two swapped records (link)', () => {
    const records = chain(5);
    const [a, b] = [records[1]!, records[2]!];
    records[1] = { ...b, seq: 2 };
    records[2] = { ...a, seq: 3 };
    expect(verify(records).broken).toEqual({ id: b.id, seq: 2, reason: 'link_mismatch' });
  });

  it('names the last intact record when the tail was removed (head)', () => {
    const records = chain(5);
    const head = { seq: 5, hash: records[4]!.integrityHash };
    const v = verify(records.slice(0, 3), head);
    expect(v.broken).toEqual({ id: records[2]!.id, seq: 3, reason: 'head_mismatch' });
  });

  it('stops at the first break', () => {
    const records = chain(6);
    records[1] = { ...records[1]!, action: 'secret.write' };
    records[4] = { ...records[4]!, action: 'secret.write' };
    const v = verify(records);
    expect(v.broken?.id).toBe(records[1]!.id);
    expect([v.checked, v.verified]).toEqual([2, 1]);
  });
});
