import { type IdentityKeys, currentCaller } from '@custos/auth';
import { type AuditEvent as AuditEventMessage, BreakReason } from '@custos/proto/custos/audit/v1/messages';
import type { AuditServiceServer } from '@custos/proto/custos/audit/v1/service';
import type { AsyncService, RpcAccess } from '@custos/service-kit';
import type { AuditService } from '../chain/audit-service.js';
import type { AuditEvent } from '../chain/audit-types.js';
import type { BreakReason as Reason } from '../chain/chain-fns.js';

const REASONS: Record<Reason, BreakReason> = {
  hmac_mismatch: BreakReason.BREAK_REASON_HMAC_MISMATCH,
  sequence_gap: BreakReason.BREAK_REASON_SEQUENCE_GAP,
  link_mismatch: BreakReason.BREAK_REASON_LINK_MISMATCH,
  head_mismatch: BreakReason.BREAK_REASON_HEAD_MISMATCH,
};

function eventMessage(e: AuditEvent): AuditEventMessage {
  return {
    id: e.id,
    orgId: e.orgId,
    sequence: String(e.sequence),
    action: e.action,
    actorType: e.actorType,
    ...(e.actorId !== null ? { actorId: e.actorId } : {}),
    resourceType: e.resourceType,
    ...(e.resourceId !== null ? { resourceId: e.resourceId } : {}),
    details: e.details,
    ...(e.ipAddress !== null ? { ipAddress: e.ipAddress } : {}),
    ...(e.requestId !== null ? { requestId: e.requestId } : {}),
    createdAt: e.createdAt.toISOString(),
    prevHash: e.prevHash,
    integrityHash: e.integrityHash,
  };
}

/** Who may call AuditService: the gateway (users' queries, and the records of requests it refuses). */
export const auditAccess: RpcAccess<AuditServiceServer> = { default: ['gateway'] };

/** gRPC adapter of AuditService: verify the caller, decode, call the rules, encode. */
export function auditGrpc(deps: {
  keys: IdentityKeys;
  audit: Pick<AuditService, 'list' | 'verify' | 'record'>;
}): AsyncService<AuditServiceServer> {
  const caller = () => currentCaller(deps.keys);
  return {
    async listEvents(req) {
      const r = await deps.audit.list(await caller(), {
        // Proto3 sends 0 for "not given".
        limit: req.limit === 0 ? 100 : req.limit,
        offset: req.offset,
        ...(req.action ? { action: req.action } : {}),
      });
      return { records: r.events.map(eventMessage), count: String(r.count) };
    },
    async verify() {
      const r = await deps.audit.verify(await caller());
      return {
        chainValid: r.chainValid,
        eventsChecked: String(r.eventsChecked),
        eventsVerified: String(r.eventsVerified),
        ...(r.broken?.eventId ? { brokenAtEventId: r.broken.eventId } : {}),
        ...(r.broken ? { brokenAtSequence: String(r.broken.sequence) } : {}),
        reason: r.broken ? REASONS[r.broken.reason] : BreakReason.BREAK_REASON_UNSPECIFIED,
        scheme: r.scheme,
      };
    },
    async recordEvent(req) {
      const id = await deps.audit.record(await caller(), {
        action: req.action,
        resourceType: req.resourceType,
        resourceId: req.resourceId,
        details: req.metadata ?? {},
      });
      return { id };
    },
  };
}
