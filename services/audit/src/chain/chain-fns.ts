import { createHmac, timingSafeEqual } from 'node:crypto';
import { canonicalJson } from '@custos/service-kit';

/** A dotted action name such as `secret.read`. */
export const ACTION_NAME = /^[a-z0-9_]+(\.[a-z0-9_]+)+$/;

/** The `prev_hash` of an org's first record. */
export const GENESIS_HASH = '0'.repeat(64);

/** The fields of a record that its HMAC covers (DECISIONS.md: audit). */
export interface ChainedFields {
  prevHash: string;
  orgId: string;
  actorType: string;
  actorId: string | null;
  action: string;
  resourceType: string;
  resourceId: string | null;
  metadata: unknown;
  createdAt: Date;
}

export { canonicalJson };

/**
 * `integrity_hash` = lowercase hex HMAC-SHA256 over the canonical JSON of
 * `[prev_hash, org_id, actor_type, actor_id, action, resource, metadata, created_at]`, where
 * `resource` is `{type, id}` and `created_at` is ISO 8601 with milliseconds in UTC.
 */
export function integrityHash(key: Buffer, f: ChainedFields): string {
  const message = canonicalJson([
    f.prevHash,
    f.orgId,
    f.actorType,
    f.actorId,
    f.action,
    { type: f.resourceType, id: f.resourceId },
    f.metadata,
    f.createdAt.toISOString(),
  ]);
  return createHmac('sha256', key).update(message, 'utf8').digest('hex');
}

/** Constant-time comparison of two hex hashes. */
export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Why a record fails verification. */
export type BreakReason = 'hmac_mismatch' | 'link_mismatch' | 'sequence_gap' | 'head_mismatch';

/** A stored record as verification reads it. */
export interface StoredRecord extends ChainedFields {
  id: string;
  seq: number;
  integrityHash: string;
}

/**
 * Walks records in sequence order and reports the first that fails. Feed it every record of one
 * org's chain, then call `finish` with the stored chain head.
 */
export class ChainVerifier {
  private expectedSeq = 1;
  private expectedPrev = GENESIS_HASH;
  private lastId: string | null = null;
  checked = 0;
  verified = 0;
  broken: { id: string | null; seq: number; reason: BreakReason } | undefined;

  constructor(private readonly key: Buffer) {}

  /** Checks the next record; false once the chain is broken (later records are not examined). */
  next(r: StoredRecord): boolean {
    if (this.broken) return false;
    this.checked += 1;
    let reason: BreakReason | undefined;
    if (!sameHash(integrityHash(this.key, r), r.integrityHash)) reason = 'hmac_mismatch';
    else if (r.seq !== this.expectedSeq) reason = 'sequence_gap';
    else if (!sameHash(r.prevHash, this.expectedPrev)) reason = 'link_mismatch';
    if (reason) {
      this.broken = { id: r.id, seq: r.seq, reason };
      return false;
    }
    this.verified += 1;
    this.expectedSeq += 1;
    this.expectedPrev = r.integrityHash;
    this.lastId = r.id;
    return true;
  }

  /**
   * After the last record: the chain head must name the last record's position and hash, or records
   * were removed from the end (the last intact record is named).
   */
  finish(head: { seq: number; hash: string } | undefined): void {
    if (this.broken) return;
    const seq = head?.seq ?? 0;
    const hash = head?.hash ?? GENESIS_HASH;
    if (seq !== this.expectedSeq - 1 || !sameHash(hash, this.expectedPrev)) {
      this.broken = { id: this.lastId, seq: this.expectedSeq - 1, reason: 'head_mismatch' };
    }
  }
}

/**
 * The details a record is chained with: `ip_address` and `request_id` are folded in, so the HMAC
 * covers them too; they overwrite same-named keys a caller might have put there.
 */
export function foldContext(
  details: Record<string, unknown>,
  ip: string | null,
  requestId: string | null,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...details };
  delete out['ip_address'];
  delete out['request_id'];
  if (ip) out['ip_address'] = ip;
  if (requestId) out['request_id'] = requestId;
  return out;
}
