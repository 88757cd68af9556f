import {
  type KeyObject,
  createHash,
  createHmac,
  createPublicKey,
  timingSafeEqual,
  verify,
} from 'node:crypto';

// The offline verifier of an audit export. It repeats, on purpose, the few lines of the audit
// service's canonical JSON, HMAC and checkpoint message (services/audit/src/chain/chain-fns.ts and
// src/checkpoints/checkpoint-fns.ts) so that it depends on nothing of the service.

/** The `prev_hash` of an org's first record. */
export const GENESIS_HASH = '0'.repeat(64);
const CHECKPOINT_CONTEXT = 'custos-audit-checkpoint-v1';
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** One record of an export (the fields of GET /v1/audit/events). */
export interface ExportedEvent {
  id: string;
  org_id: string;
  sequence: number;
  action: string;
  actor_type: string;
  actor_id: string | null;
  resource_type: string;
  resource_id: string | null;
  details: Record<string, unknown>;
  created_at: string;
  prev_hash: string;
  integrity_hash: string;
  key_version?: number;
}

/** One signed checkpoint of an export or of GET /v1/audit/checkpoints. */
export interface ExportedCheckpoint {
  id: string;
  org_id: string;
  sequence: number;
  head_hash: string;
  created_at: string;
  key_id: string;
  signature: string;
}

/** GET /v1/audit/export. */
export interface AuditExport {
  format: string;
  org_id: string;
  head: { sequence: number; hash: string };
  events: ExportedEvent[];
  checkpoints: ExportedCheckpoint[];
  key?: { key_id?: string; public_key?: string };
}

/** What was checked and what failed. */
export interface Report {
  valid: boolean;
  org_id: string;
  events: number;
  /** Links and sequence of every record. */
  links_checked: number;
  /** Records whose HMAC was recomputed (only with an HMAC key of their key_version). */
  hmac_checked: number;
  /** Records not HMAC-checked for want of their key version. */
  hmac_unchecked: number;
  checkpoints_checked: number;
  /** The newest checkpoint that holds (signature, record at its position, export reaches it). */
  anchored_at: number | null;
  problems: string[];
}

/** Canonical JSON: keys sorted by code unit at every depth, no whitespace, arrays in order. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    const s = JSON.stringify(value);
    if (s === undefined) throw new Error('value has no JSON form');
    return s;
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

/** The record's integrity_hash under `key` (the audit service's scheme, see /v1/audit/verify). */
export function recordHash(key: Buffer, e: ExportedEvent): string {
  const message = canonicalJson([
    e.prev_hash,
    e.org_id,
    e.actor_type,
    e.actor_id,
    e.action,
    { type: e.resource_type, id: e.resource_id },
    e.details,
    new Date(e.created_at).toISOString(),
  ]);
  return createHmac('sha256', key).update(message, 'utf8').digest('hex');
}

/** The bytes a checkpoint's signature covers. */
export function checkpointMessage(c: ExportedCheckpoint): Buffer {
  const body = canonicalJson({
    created_at: new Date(c.created_at).toISOString(),
    head_hash: c.head_hash,
    key_id: c.key_id,
    org_id: c.org_id.toLowerCase(),
    seq: c.sequence,
  });
  return Buffer.from(`${CHECKPOINT_CONTEXT}\n${body}`, 'utf8');
}

/** Reads an Ed25519 public key: SPKI PEM, or base64 of the raw 32 bytes. */
export function readPublicKey(text: string): KeyObject {
  const t = text.trim();
  const key = t.startsWith('-----BEGIN')
    ? createPublicKey({ key: t, format: 'pem' })
    : (() => {
        const raw = Buffer.from(t, 'base64');
        if (raw.length !== 32) throw new Error('the public key must be SPKI PEM or base64 of 32 bytes');
        return createPublicKey({
          key: Buffer.concat([ED25519_SPKI_PREFIX, raw]),
          format: 'der',
          type: 'spki',
        });
      })();
  if (key.asymmetricKeyType !== 'ed25519') throw new Error('the public key is not an Ed25519 key');
  return key;
}

/** First 16 hex digits of SHA-256 of the raw public key. */
export function keyIdOf(key: KeyObject): string {
  const der = key.export({ format: 'der', type: 'spki' });
  return createHash('sha256')
    .update(der.subarray(der.length - 32))
    .digest('hex')
    .slice(0, 16);
}

function same(a: string, b: string): boolean {
  const x = Buffer.from(String(a), 'utf8');
  const y = Buffer.from(String(b), 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Verifies an export against the public key, the export's own checkpoints and any checkpoints kept
 * apart (`extraCheckpoints`, e.g. saved from GET /v1/audit/checkpoints earlier): every record links
 * to the one before from the first, without gaps, up to the export's head; every checkpoint is
 * signed by the key and the record at its position carries its head hash. With HMAC keys (by
 * key_version) each record's integrity_hash is recomputed too; without, record contents are not
 * checked (only that the sequence of hashes is the one the checkpoints signed).
 */
export function verifyExport(
  exp: AuditExport,
  publicKey: KeyObject,
  opts: { extraCheckpoints?: ExportedCheckpoint[]; hmacKeys?: Map<number, Buffer> } = {},
): Report {
  const problems: string[] = [];
  const events = [...(exp.events ?? [])].sort((a, b) => a.sequence - b.sequence);
  const org = String(exp.org_id ?? '').toLowerCase();
  if (exp.format !== 'custos-audit-export-v1')
    problems.push(`unknown export format ${JSON.stringify(exp.format)}`);
  let prev = GENESIS_HASH;
  let links = 0;
  let hmacChecked = 0;
  let hmacUnchecked = 0;
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!;
    if (e.org_id.toLowerCase() !== org) problems.push(`record ${e.sequence} belongs to another org`);
    if (e.sequence !== i + 1) {
      problems.push(`sequence gap: record ${i + 1} is missing (found ${e.sequence})`);
      break;
    }
    if (!same(e.prev_hash, prev)) {
      problems.push(`record ${e.sequence} does not link to the record before it`);
      break;
    }
    const key = opts.hmacKeys?.get(e.key_version ?? 1);
    if (key) {
      if (!same(recordHash(key, e), e.integrity_hash))
        problems.push(`record ${e.sequence}: HMAC mismatch (edited)`);
      hmacChecked += 1;
    } else hmacUnchecked += 1;
    links += 1;
    prev = e.integrity_hash;
  }
  const last = events.at(-1);
  if (
    exp.head &&
    (exp.head.sequence !== (last?.sequence ?? 0) ||
      !same(exp.head.hash, last?.integrity_hash ?? GENESIS_HASH))
  )
    problems.push(`the export's head (${exp.head.sequence}) is not its last record (${last?.sequence ?? 0})`);

  const keyId = keyIdOf(publicKey);
  if (exp.key?.key_id && exp.key.key_id !== keyId)
    problems.push(`the export names checkpoint key ${exp.key.key_id}, not the given public key (${keyId})`);
  const bySeq = new Map(events.map((e) => [e.sequence, e]));
  const all = [...(exp.checkpoints ?? []), ...(opts.extraCheckpoints ?? [])];
  let anchored: number | null = null;
  for (const c of all) {
    const where = `checkpoint ${c.id} (sequence ${c.sequence})`;
    if (c.org_id.toLowerCase() !== org) {
      problems.push(`${where} is of another org`);
      continue;
    }
    let signed = false;
    try {
      signed =
        c.key_id === keyId &&
        verify(null, checkpointMessage(c), publicKey, Buffer.from(c.signature, 'base64'));
    } catch {
      signed = false;
    }
    if (!signed) {
      problems.push(`${where}: signature does not verify with the given public key`);
      continue;
    }
    const r = bySeq.get(c.sequence);
    if (!r) {
      problems.push(`${where}: the export has no record at that position (records removed from the end)`);
      continue;
    }
    if (!same(r.integrity_hash, c.head_hash)) {
      problems.push(`${where}: the record there has another hash (the chain was rewritten)`);
      continue;
    }
    if (c.sequence <= links) anchored = Math.max(anchored ?? 0, c.sequence);
  }
  if (all.length === 0) problems.push('no checkpoint: nothing anchors the chain to a signed head');
  return {
    valid: problems.length === 0,
    org_id: org,
    events: events.length,
    links_checked: links,
    hmac_checked: hmacChecked,
    hmac_unchecked: hmacUnchecked,
    checkpoints_checked: all.length,
    anchored_at: anchored,
    problems,
  };
}
