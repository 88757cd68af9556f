import { generateKeyPairSync, randomBytes, randomUUID, sign } from 'node:crypto';
import {
  type AuditExport,
  type ExportedCheckpoint,
  type ExportedEvent,
  GENESIS_HASH,
  checkpointMessage,
  keyIdOf,
  readPublicKey,
  recordHash,
  verifyExport,
} from './verify';

const hmac = randomBytes(32);
const { privateKey, publicKey } = generateKeyPairSync('ed25519');
const org = randomUUID();

function chain(n: number): ExportedEvent[] {
  const out: ExportedEvent[] = [];
  let prev = GENESIS_HASH;
  for (let i = 1; i <= n; i++) {
    const e: ExportedEvent = {
      id: randomUUID(),
      org_id: org,
      sequence: i,
      action: 'secret.read',
      actor_type: 'user',
      actor_id: 'u',
      resource_type: 'secret',
      resource_id: `p/${i}`,
      details: { i, ip_address: '192.0.2.1' },
      created_at: new Date(1_800_000_000_000 + i).toISOString(),
      prev_hash: prev,
      integrity_hash: '',
      key_version: 1,
    };
    e.integrity_hash = recordHash(hmac, e);
    prev = e.integrity_hash;
    out.push(e);
  }
  return out;
}

function checkpoint(e: ExportedEvent, key = privateKey, pub = publicKey): ExportedCheckpoint {
  const c: ExportedCheckpoint = {
    id: randomUUID(),
    org_id: org,
    sequence: e.sequence,
    head_hash: e.integrity_hash,
    created_at: new Date().toISOString(),
    key_id: keyIdOf(pub),
    signature: '',
  };
  c.signature = sign(null, checkpointMessage(c), key).toString('base64');
  return c;
}

function exportOf(events: ExportedEvent[], checkpoints: ExportedCheckpoint[]): AuditExport {
  const last = events.at(-1);
  return {
    format: 'custos-audit-export-v1',
    org_id: org,
    head: { sequence: last?.sequence ?? 0, hash: last?.integrity_hash ?? GENESIS_HASH },
    events,
    checkpoints,
    key: { key_id: keyIdOf(publicKey) },
  };
}

const rawPublic = publicKey.export({ format: 'der', type: 'spki' }).subarray(12).toString('base64');

describe('verifyExport', () => {
  it('accepts an intact export with its checkpoint, with and without the HMAC key', () => {
    const events = chain(6);
    const exp = exportOf(events, [checkpoint(events[5]!)]);
    const key = readPublicKey(rawPublic);
    expect(verifyExport(exp, key)).toMatchObject({
      valid: true,
      links_checked: 6,
      hmac_unchecked: 6,
      anchored_at: 6,
    });
    expect(verifyExport(exp, key, { hmacKeys: new Map([[1, hmac]]) })).toMatchObject({
      valid: true,
      hmac_checked: 6,
    });
    const pem = publicKey.export({ format: 'pem', type: 'spki' }).toString();
    expect(verifyExport(exp, readPublicKey(pem)).valid).toBe(true);
  });

  it('catches the last records removed and the head rewound, against a checkpoint kept apart', () => {
    const events = chain(6);
    const earlier = checkpoint(events[5]!);
    // The tampered export: three records fewer, head moved back, the checkpoint gone from it.
    const tampered = exportOf(events.slice(0, 3), [checkpoint(events[1]!)]);
    expect(verifyExport(tampered, publicKey).valid).toBe(true);
    const r = verifyExport(tampered, publicKey, { extraCheckpoints: [earlier] });
    expect(r.valid).toBe(false);
    expect(r.problems.join('\n')).toMatch(/no record at that position/);
  });

  it('catches a rewritten chain, a gap, a broken link, a forged or foreign checkpoint, and an edit with the HMAC key', () => {
    const events = chain(5);
    const cp = checkpoint(events[4]!);
    const gap = exportOf([...events.slice(0, 2), ...events.slice(3)], [cp]);
    expect(verifyExport(gap, publicKey).problems.join()).toMatch(/sequence gap/);
    const relinked = events.map((e) => ({ ...e }));
    relinked[2]!.prev_hash = 'f'.repeat(64);
    expect(verifyExport(exportOf(relinked, [cp]), publicKey).problems.join()).toMatch(/does not link/);
    const other = generateKeyPairSync('ed25519');
    const forged = checkpoint(events[4]!, other.privateKey, other.publicKey);
    expect(verifyExport(exportOf(events, [forged]), publicKey).problems.join()).toMatch(/signature/);
    const rehashed = { ...cp, head_hash: 'a'.repeat(64) };
    expect(verifyExport(exportOf(events, [rehashed]), publicKey).valid).toBe(false);
    const edited = events.map((e) => ({ ...e }));
    edited[1]!.details = { i: 99 };
    const exp = exportOf(edited, [cp]);
    // Without the HMAC key an edit of contents is not visible; with it, it is.
    expect(verifyExport(exp, publicKey).valid).toBe(true);
    expect(verifyExport(exp, publicKey, { hmacKeys: new Map([[1, hmac]]) }).problems.join()).toMatch(
      /record 2: HMAC mismatch/,
    );
    expect(verifyExport(exportOf(events, []), publicKey).problems.join()).toMatch(/no checkpoint/);
  });
});
