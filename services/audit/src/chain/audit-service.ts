import type { Principal } from '@custos/auth';
import type { AuditRecordData, EventEnvelope } from '@custos/events';
import {
  InvalidArgumentError,
  type Logger,
  PermissionDeniedError,
  type Transaction,
  isUuid,
} from '@custos/service-kit';
import { ChainVerifier } from './chain-fns.js';
import type { AuditRow, AuditStore, NewRecord } from './audit-store.js';

/** Actions a service without tables (the gateway) may record through RecordEvent. */
export const DIRECT_ACTIONS = new Set(['ip_rule.denied']);

const ACTOR_TYPES = new Set(['user', 'agent', 'system', 'anonymous']);
const ACTION = /^[a-z0-9_]+(\.[a-z0-9_]+)+$/;

/** The verification scheme, as `GET /v1/audit/verify` describes it. */
export const VERIFY_SCHEME = {
  algorithm: 'HMAC-SHA256',
  chain_structure:
    'per org; integrity_hash = HMAC(canonical JSON of [prev_hash, org_id, actor_type, actor_id, action, ' +
    '{type: resource_type, id: resource_id}, details, created_at]); prev_hash = the previous ' +
    "record's integrity_hash, 64 zeros for the first",
  hash_field: 'integrity_hash',
  link_field: 'prev_hash',
  documentation: 'docs/decisions.md#audit',
};

/** A record in its HTTP shape (openapi AuditEvent, plus its chain fields). */
export function auditEventJson(r: AuditRow): Record<string, unknown> {
  const details = r.metadata as Record<string, unknown>;
  return {
    id: r.id,
    org_id: r.orgId,
    sequence: r.seq,
    action: r.action,
    actor_type: r.actorType,
    actor_id: r.actorId,
    resource_type: r.resourceType,
    resource_id: r.resourceId,
    details,
    ip_address: typeof details['ip_address'] === 'string' ? details['ip_address'] : null,
    request_id: typeof details['request_id'] === 'string' ? details['request_id'] : null,
    created_at: r.createdAt.toISOString(),
    prev_hash: r.prevHash,
    integrity_hash: r.integrityHash,
  };
}

// The record a service sent, checked: a malformed one is a bug upstream and is refused loudly.
function recordFromEvent(event: EventEnvelope): NewRecord {
  const d = event.data as unknown as Partial<AuditRecordData>;
  const problems: string[] = [];
  if (typeof d.org_id !== 'string' || !isUuid(d.org_id)) problems.push('org_id');
  if (typeof d.actor_type !== 'string' || !ACTOR_TYPES.has(d.actor_type)) problems.push('actor_type');
  if (d.actor_id !== null && typeof d.actor_id !== 'string') problems.push('actor_id');
  if (typeof d.action !== 'string' || !ACTION.test(d.action)) problems.push('action');
  if (typeof d.resource_type !== 'string' || !d.resource_type) problems.push('resource_type');
  if (d.resource_id !== null && typeof d.resource_id !== 'string') problems.push('resource_id');
  if (!d.metadata || typeof d.metadata !== 'object' || Array.isArray(d.metadata)) problems.push('metadata');
  const at = typeof d.occurred_at === 'string' ? new Date(d.occurred_at) : new Date(NaN);
  if (Number.isNaN(at.getTime())) problems.push('occurred_at');
  if (problems.length > 0) throw new Error(`audit record ${event.id} is malformed: ${problems.join(', ')}`);
  return {
    id: event.id,
    orgId: d.org_id!,
    actorType: d.actor_type!,
    actorId: d.actor_id ?? null,
    action: d.action!,
    resourceType: d.resource_type!,
    resourceId: d.resource_id ?? null,
    metadata: withContext(d.metadata!, d.client_ip ?? null, d.request_id ?? null),
    createdAt: at,
  };
}

// `ip_address` and `request_id` are folded into the details, so the HMAC covers them too; they
// overwrite same-named keys a caller might have put there.
function withContext(
  metadata: Record<string, unknown>,
  ip: string | null,
  requestId: string | null,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...metadata };
  delete out['ip_address'];
  delete out['request_id'];
  if (ip) out['ip_address'] = ip;
  if (requestId) out['request_id'] = requestId;
  return out;
}

function requireAuditor(p: Principal): void {
  if (p.kind !== 'user' || (p.role !== 'owner' && p.role !== 'admin')) {
    throw new PermissionDeniedError("only the org's owners and admins may read its audit log");
  }
}

/** Audit rules: chaining what services record, listing and verifying an org's chain. */
export class AuditService {
  constructor(
    private readonly store: AuditStore,
    private readonly key: Buffer,
    private readonly logger: Logger,
  ) {}

  /** Chains one `audit.recorded` event (inside the consumer's inbox transaction). */
  async applyEvent(event: EventEnvelope, tx: Transaction): Promise<void> {
    const row = await this.store.append(tx, recordFromEvent(event));
    this.logger.debug({ org_id: row.orgId, seq: row.seq, action: row.action }, 'audit record chained');
  }

  /** `GET /v1/audit/events`. */
  async list(
    p: Principal,
    q: { limit: number; offset: number; action: string },
  ): Promise<{ events: Record<string, unknown>[]; count: number }> {
    requireAuditor(p);
    const limit = q.limit === 0 ? 100 : q.limit;
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
      throw new InvalidArgumentError('limit', 'limit must be an integer from 1 to 1000');
    if (!Number.isInteger(q.offset) || q.offset < 0)
      throw new InvalidArgumentError('offset', 'offset must be a non-negative integer');
    if (q.action && (q.action.length > 100 || !ACTION.test(q.action)))
      throw new InvalidArgumentError('action', 'action must be a dotted action name such as secret.read');
    const { rows, total } = await this.store.list(p.orgId, { limit, offset: q.offset, action: q.action });
    return { events: rows.map(auditEventJson), count: total };
  }

  /** `GET /v1/audit/verify`: recomputes every HMAC and link and names the first broken record. */
  async verify(p: Principal): Promise<Record<string, unknown>> {
    requireAuditor(p);
    const verifier = new ChainVerifier(this.key);
    const head = await this.store.head(p.orgId);
    for await (const r of this.store.walk(p.orgId, head?.seq ?? 0)) {
      if (!verifier.next(r)) break;
    }
    verifier.finish(head);
    return {
      chain_valid: !verifier.broken,
      events_checked: verifier.checked,
      events_verified: verifier.verified,
      broken_at_event_id: verifier.broken?.id ?? null,
      broken_at_sequence: verifier.broken ? verifier.broken.seq : null,
      reason: verifier.broken?.reason ?? null,
      scheme: VERIFY_SCHEME,
    };
  }

  /** RecordEvent: a record about the calling principal, from a service that owns no tables. */
  async record(
    p: Principal,
    r: {
      id: string;
      action: string;
      resourceType: string;
      resourceId: string;
      metadata: Record<string, unknown>;
      clientIp: string | null;
      requestId: string | null;
    },
  ): Promise<string> {
    if (!DIRECT_ACTIONS.has(r.action))
      throw new InvalidArgumentError(
        'action',
        `only ${[...DIRECT_ACTIONS].join(', ')} may be recorded directly`,
      );
    if (!r.resourceType || r.resourceType.length > 100)
      throw new InvalidArgumentError('resource_type', 'resource_type must be 1 to 100 characters');
    if (r.resourceId.length > 1000)
      throw new InvalidArgumentError('resource_id', 'resource_id must be at most 1000 characters');
    const row = await this.store.appendNow({
      id: r.id,
      orgId: p.orgId,
      actorType: p.kind,
      actorId: p.kind === 'user' ? p.userId : p.agentId,
      action: r.action,
      resourceType: r.resourceType,
      resourceId: r.resourceId || null,
      metadata: withContext(r.metadata, r.clientIp, r.requestId),
      createdAt: new Date(),
    });
    return row.id;
  }
}
