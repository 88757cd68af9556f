import { randomUUID } from 'node:crypto';
import { type Principal, requireHumanAdmin } from '@custos/auth';
import { InvalidArgumentError, type Logger, NotFoundError, UnavailableError } from '@custos/service-kit';
import { sameHash } from '../chain/chain-fns.js';
import type { AuditStore } from '../chain/audit-store.js';
import { auditEventOf } from '../chain/audit-service.js';
import type { AuditEvent } from '../chain/audit-types.js';
import {
  type Checkpoint,
  type CheckpointKey,
  checkpointSignatureValid,
  signCheckpoint,
} from './checkpoint-fns.js';
import type { CheckpointStore } from './checkpoint-store.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The outcome of checking an org's chain against one checkpoint. */
export interface CheckpointCheck {
  id: string;
  sequence: number;
  signatureValid: boolean;
  recordMatches: boolean;
  headAtOrAfter: boolean;
}

/** The public half of the signing key. */
export interface CheckpointKeyInfo {
  keyId: string;
  publicKey: string;
  publicKeyPem: string;
}

/** A page of an org's records in chain order. */
export interface ExportPage {
  records: AuditEvent[];
  headSequence: number;
  headHash: string;
  nextSequence: number;
}

/**
 * Signed checkpoints of org chain heads: made periodically for every org whose head moved and on
 * demand; verified against the chain; exported with the records for an offline verifier.
 */
export class CheckpointService {
  constructor(
    private readonly store: CheckpointStore,
    private readonly chain: AuditStore,
    private readonly key: CheckpointKey | undefined,
    private readonly logger: Logger,
  ) {}

  private signingKey(): CheckpointKey {
    if (!this.key)
      throw new UnavailableError(
        'audit checkpoints are not configured (AUDIT_CHECKPOINT_SIGNING_KEY is unset)',
      );
    return this.key;
  }

  /** The public key, for callers that verify on their own. */
  keyInfo(): CheckpointKeyInfo {
    const k = this.signingKey();
    return { keyId: k.keyId, publicKey: k.publicKeyBase64, publicKeyPem: k.publicKeyPem };
  }

  /** Signs and stores a checkpoint of a head (the existing one when that position has one). */
  private async checkpoint(orgId: string, head: { seq: number; hash: string }): Promise<Checkpoint> {
    const signed = signCheckpoint(this.signingKey(), {
      orgId: orgId.toLowerCase(),
      seq: head.seq,
      headHash: head.hash,
      createdAt: new Date(),
    });
    return this.store.insert({ id: randomUUID(), ...signed });
  }

  /** A checkpoint of the caller's org's head now; owners and admins only. */
  async create(p: Principal): Promise<Checkpoint> {
    requireHumanAdmin(p, 'checkpoint the audit log');
    this.signingKey();
    const head = await this.chain.head(p.orgId);
    if (!head || head.seq === 0) throw new NotFoundError('audit chain of this org');
    return this.checkpoint(p.orgId, head);
  }

  /**
   * One round of the periodic checkpointing: every org whose head moved since its last checkpoint
   * gets one, `batch` orgs at a time. Several replicas may run it: a position is checkpointed once.
   */
  async checkpointMovedHeads(batch = 500): Promise<number> {
    if (!this.key) return 0;
    let made = 0;
    // Org id order, each org at most once a round (a busy org's head moves on meanwhile).
    let after = '00000000-0000-0000-0000-000000000000';
    for (;;) {
      const heads = await this.store.movedHeads(after, batch);
      for (const h of heads) {
        await this.checkpoint(h.orgId, h);
        made += 1;
      }
      if (heads.length < batch) break;
      after = heads[heads.length - 1]!.orgId;
    }
    if (made > 0) this.logger.info({ checkpoints: made }, 'audit checkpoints signed');
    return made;
  }

  /** The caller's org's checkpoints, newest first, with the key; owners and admins only. */
  async list(
    p: Principal,
    q: { limit: number; offset: number },
  ): Promise<{ checkpoints: Checkpoint[]; count: number; key: CheckpointKeyInfo }> {
    requireHumanAdmin(p, 'read the audit log');
    if (!Number.isInteger(q.limit) || q.limit < 1 || q.limit > 1000)
      throw new InvalidArgumentError('limit', 'limit must be an integer from 1 to 1000');
    if (!Number.isInteger(q.offset) || q.offset < 0)
      throw new InvalidArgumentError('offset', 'offset must be a non-negative integer');
    const key = this.keyInfo();
    const { rows, total } = await this.store.list(p.orgId, q.limit, q.offset);
    return { checkpoints: rows, count: total, key };
  }

  /**
   * Checks the caller's org's chain against one of its checkpoints: the signature, the record at
   * the checkpoint's position still carries the signed hash, and the head is at or after it. (The
   * records' HMACs and links are checked by AuditService.verify.)
   */
  async check(p: Principal, id: string): Promise<CheckpointCheck> {
    requireHumanAdmin(p, 'verify the audit log');
    if (!UUID.test(id))
      throw new InvalidArgumentError('checkpoint', 'checkpoint must be a checkpoint id (UUID)');
    const key = this.signingKey();
    const c = await this.store.get(p.orgId, id);
    if (!c) throw new NotFoundError('checkpoint', id);
    const [record, head] = await Promise.all([this.store.recordAt(p.orgId, c.seq), this.chain.head(p.orgId)]);
    return {
      id: c.id,
      sequence: c.seq,
      signatureValid: checkpointSignatureValid(key.publicKey, c),
      recordMatches: record !== undefined && sameHash(record.integrityHash, c.headHash),
      headAtOrAfter: (head?.seq ?? 0) >= c.seq,
    };
  }

  /** A page of the caller's org's records in chain order; owners and admins only. */
  async exportPage(p: Principal, q: { fromSequence: number; limit: number }): Promise<ExportPage> {
    requireHumanAdmin(p, 'read the audit log');
    if (!Number.isInteger(q.fromSequence) || q.fromSequence < 1)
      throw new InvalidArgumentError('from_sequence', 'from_sequence must be a positive integer');
    if (!Number.isInteger(q.limit) || q.limit < 1 || q.limit > 2000)
      throw new InvalidArgumentError('limit', 'limit must be an integer from 1 to 2000');
    const head = (await this.chain.head(p.orgId)) ?? { seq: 0, hash: '0'.repeat(64) };
    const rows = await this.store.page(p.orgId, q.fromSequence, head.seq, q.limit);
    const last = rows.at(-1)?.seq ?? head.seq;
    return {
      records: rows.map(auditEventOf),
      headSequence: head.seq,
      headHash: head.hash,
      nextSequence: rows.length === q.limit && last < head.seq ? last + 1 : 0,
    };
  }
}
