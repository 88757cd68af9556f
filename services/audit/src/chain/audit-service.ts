import { randomUUID } from 'node:crypto';
import { type Principal, requireHumanAdmin } from '@custos/auth';
import { type AuditRecordData, type BatchTx, auditOf, auditRecordData } from '@custos/events';
import { InvalidArgumentError, type Logger, type Transaction } from '@custos/service-kit';
import { ACTION_NAME, ChainVerifier, foldContext } from './chain-fns.js';
import type { AuditRow, AuditStore, NewRecord } from './audit-store.js';
import { SELF_PRODUCER } from '../events/audit-producers.js';
import type {
  AuditEvent,
  AuditPage,
  AuditQuery,
  DirectRecordInput,
  VerifyResult,
  VerifyScheme,
} from './audit-types.js';

/** Actions a service without tables (the gateway) may record through RecordEvent. */
export const DIRECT_ACTIONS = new Set(['ip_rule.denied']);

/** What a `log`-mode guardrail writes when it lets a violation through (SPEC §6). */
export const WOULD_DENY = 'guardrail_shadow.would_deny';

/** How records are chained (DECISIONS.md: audit), as verify describes it. */
export const VERIFY_SCHEME: VerifyScheme = {
  algorithm: 'HMAC-SHA256',
  chainStructure:
    'per org, in sequence order; integrity_hash = lowercase hex HMAC-SHA256 (key AUDIT_HMAC_KEY) over ' +
    'the canonical JSON (object keys sorted at every depth, no whitespace) of [prev_hash, org_id, ' +
    'actor_type, actor_id, action, {"id": resource_id, "type": resource_type}, details, created_at], ' +
    "created_at in ISO 8601 UTC with milliseconds; prev_hash = the previous record's integrity_hash, " +
    '64 zeros for the first',
  hashField: 'integrity_hash',
  linkField: 'prev_hash',
};

/** A stored row as the service hands it out. */
export function auditEventOf(r: AuditRow): AuditEvent {
  const details = r.metadata as Record<string, unknown>;
  const text = (v: unknown) => (typeof v === 'string' ? v : null);
  return {
    id: r.id,
    orgId: r.orgId,
    sequence: r.seq,
    action: r.action,
    actorType: r.actorType,
    actorId: r.actorId,
    resourceType: r.resourceType,
    resourceId: r.resourceId,
    details,
    ipAddress: text(details['ip_address']),
    requestId: text(details['request_id']),
    createdAt: r.createdAt,
    prevHash: r.prevHash,
    integrityHash: r.integrityHash,
    keyVersion: r.keyVersion,
  };
}

/** Audit rules: chaining what services record, listing and verifying an org's chain. */
export class AuditService {
  constructor(
    private readonly store: AuditStore,
    private readonly key: Buffer,
    private readonly logger: Logger,
  ) {}

  /** Chains one record a service sent (inside the consumer's inbox transaction). */
  async chain(tx: Transaction, record: NewRecord): Promise<void> {
    const row = await this.store.append(tx, record);
    this.logger.debug({ org_id: row.orgId, seq: row.seq, action: row.action }, 'audit record chained');
  }

  /**
   * Chains records services sent, in the order given within each org (inside the consumer's
   * inbox transaction of the batch).
   */
  async chainBatch(client: BatchTx, records: readonly NewRecord[]): Promise<void> {
    const chained = await this.store.appendBatch(client, records);
    if (chained.length > 0 && this.logger.isLevelEnabled('debug'))
      this.logger.debug(
        { records: chained.map((r) => ({ org_id: r.orgId, seq: r.seq, action: r.action })) },
        'audit records chained',
      );
  }

  /** The caller's org's records, newest first; owners and admins only. */
  async list(p: Principal, q: AuditQuery): Promise<AuditPage> {
    requireHumanAdmin(p, 'read the audit log');
    // The gateway checks these too; a direct caller gets the same answers.
    if (!Number.isInteger(q.limit) || q.limit < 1 || q.limit > 1000)
      throw new InvalidArgumentError('limit', 'limit must be an integer from 1 to 1000');
    if (!Number.isInteger(q.offset) || q.offset < 0)
      throw new InvalidArgumentError('offset', 'offset must be a non-negative integer');
    if (q.action !== undefined && (q.action.length > 100 || !ACTION_NAME.test(q.action)))
      throw new InvalidArgumentError('action', 'action must be a dotted action name such as secret.read');
    const { rows, total } = await this.store.list(p.orgId, {
      limit: q.limit,
      offset: q.offset,
      action: q.action ?? '',
    });
    return { events: rows.map(auditEventOf), count: total };
  }

  /**
   * SPEC §4.7: the caller's org's `guardrail_shadow.would_deny` records since `since`, counted by
   * `reason_code` (owners and admins). One record is one violation a `log`-mode guardrail let through.
   */
  async shadowReport(
    p: Principal,
    since: Date,
  ): Promise<{ reasonCodes: Array<{ reasonCode: string; count: number; lastAt: Date }>; total: number }> {
    requireHumanAdmin(p, 'read the guardrail shadow report');
    if (Number.isNaN(since.getTime()))
      throw new InvalidArgumentError('since', 'since must be an ISO 8601 date-time');
    const rows = await this.store.countByMetadata(p.orgId, WOULD_DENY, 'reason_code', since);
    return {
      reasonCodes: rows.map((r) => ({ reasonCode: r.value, count: r.n, lastAt: r.lastAt })),
      total: rows.reduce((sum, r) => sum + r.n, 0),
    };
  }

  /** Recomputes every HMAC and link of the caller's org's chain and names the first broken record. */
  async verify(p: Principal): Promise<VerifyResult> {
    requireHumanAdmin(p, 'verify the audit log');
    const verifier = new ChainVerifier(this.key);
    const head = await this.store.head(p.orgId);
    for await (const r of this.store.walk(p.orgId, head?.seq ?? 0)) {
      if (!verifier.next(r)) break;
    }
    verifier.finish(head);
    const b = verifier.broken;
    return {
      chainValid: !b,
      eventsChecked: verifier.checked,
      eventsVerified: verifier.verified,
      ...(b ? { broken: { eventId: b.id, sequence: b.seq, reason: b.reason } } : {}),
      scheme: VERIFY_SCHEME,
    };
  }

  /** A record about the calling principal, from a service that owns no tables. */
  async record(p: Principal, r: DirectRecordInput): Promise<string> {
    if (!DIRECT_ACTIONS.has(r.action))
      throw new InvalidArgumentError(
        'action',
        `only ${[...DIRECT_ACTIONS].join(', ')} may be recorded directly`,
      );
    if (!r.resourceType || r.resourceType.length > 100)
      throw new InvalidArgumentError('resource_type', 'resource_type must be 1 to 100 characters');
    if (r.resourceId.length > 1000)
      throw new InvalidArgumentError('resource_id', 'resource_id must be at most 1000 characters');
    const d = screened(auditOf(p, r.action, { type: r.resourceType, id: r.resourceId || null }, r.details));
    const row = await this.store.appendNow({
      id: randomUUID(),
      orgId: d.org_id,
      actorType: d.actor_type,
      actorId: d.actor_id,
      action: d.action,
      resourceType: d.resource_type,
      resourceId: d.resource_id,
      metadata: foldContext(d.metadata, d.client_ip, d.request_id),
      createdAt: new Date(d.occurred_at),
      producer: SELF_PRODUCER,
    });
    return row.id;
  }
}

// The same secret-key screen the outbox path applies; here the details come from a caller, so a
// refused key is that caller's mistake (400), not a bug of this service.
function screened(record: Parameters<typeof auditRecordData>[0]): AuditRecordData {
  try {
    return auditRecordData(record);
  } catch (err) {
    throw new InvalidArgumentError('metadata', err instanceof Error ? err.message : 'metadata refused');
  }
}
