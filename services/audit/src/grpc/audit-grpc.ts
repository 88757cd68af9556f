import { type IdentityKeys, currentCaller } from '@custos/auth';
import {
  type AuditEvent as AuditEventMessage,
  BreakReason,
  type Checkpoint as CheckpointMessage,
} from '@custos/proto/custos/audit/v1/messages';
import type { AuditServiceServer } from '@custos/proto/custos/audit/v1/service';
import type { AsyncService, RpcAccess } from '@custos/service-kit';
import type { AuditService } from '../chain/audit-service.js';
import type { AuditEvent } from '../chain/audit-types.js';
import type { BreakReason as Reason } from '../chain/chain-fns.js';
import type { Checkpoint } from '../checkpoints/checkpoint-fns.js';
import type { CheckpointService } from '../checkpoints/checkpoint-service.js';

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
    keyVersion: e.keyVersion,
  };
}

function checkpointMessage(c: Checkpoint): CheckpointMessage {
  return {
    id: c.id,
    orgId: c.orgId,
    sequence: String(c.seq),
    headHash: c.headHash,
    createdAt: c.createdAt.toISOString(),
    keyId: c.keyId,
    signature: c.signature,
  };
}

/** Who may call AuditService: the gateway (users' queries, and the records of requests it refuses). */
export const auditAccess: RpcAccess<AuditServiceServer> = { default: ['gateway'] };

/** gRPC adapter of AuditService: verify the caller, decode, call the rules, encode. */
export function auditGrpc(deps: {
  keys: IdentityKeys;
  audit: Pick<AuditService, 'list' | 'verify' | 'record' | 'shadowReport'>;
  checkpoints: Pick<CheckpointService, 'list' | 'create' | 'check' | 'exportPage'>;
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
    async guardrailShadowReport(req) {
      const r = await deps.audit.shadowReport(await caller(), new Date(req.since));
      return {
        reasonCodes: r.reasonCodes.map((x) => ({
          reasonCode: x.reasonCode,
          count: String(x.count),
          lastAt: x.lastAt.toISOString(),
        })),
        total: String(r.total),
      };
    },
    async verify(req) {
      const p = await caller();
      // The checkpoint is checked first, so an unknown id is answered before the chain is walked.
      const cp = req.checkpointId ? await deps.checkpoints.check(p, req.checkpointId) : undefined;
      const r = await deps.audit.verify(p);
      const cpFails = cp !== undefined && !(cp.signatureValid && cp.recordMatches && cp.headAtOrAfter);
      const base = {
        eventsChecked: String(r.eventsChecked),
        eventsVerified: String(r.eventsVerified),
        scheme: r.scheme,
        ...(cp ? { checkpoint: { ...cp, sequence: String(cp.sequence) } } : {}),
      };
      if (r.broken)
        return {
          ...base,
          chainValid: false,
          ...(r.broken.eventId ? { brokenAtEventId: r.broken.eventId } : {}),
          brokenAtSequence: String(r.broken.sequence),
          reason: REASONS[r.broken.reason],
        };
      if (cpFails)
        return {
          ...base,
          chainValid: false,
          brokenAtSequence: String(cp.sequence),
          reason: BreakReason.BREAK_REASON_CHECKPOINT_MISMATCH,
        };
      return { ...base, chainValid: true, reason: BreakReason.BREAK_REASON_UNSPECIFIED };
    },
    async listCheckpoints(req) {
      const r = await deps.checkpoints.list(await caller(), {
        limit: req.limit === 0 ? 100 : req.limit,
        offset: req.offset,
      });
      return { checkpoints: r.checkpoints.map(checkpointMessage), count: String(r.count), key: r.key };
    },
    async createCheckpoint() {
      const c = await deps.checkpoints.create(await caller());
      return { checkpoint: checkpointMessage(c) };
    },
    async exportEvents(req) {
      const r = await deps.checkpoints.exportPage(await caller(), {
        fromSequence: req.fromSequence === '0' || !req.fromSequence ? 1 : Number(req.fromSequence),
        limit: req.limit === 0 ? 1000 : req.limit,
      });
      return {
        records: r.records.map(eventMessage),
        headSequence: String(r.headSequence),
        headHash: r.headHash,
        nextSequence: String(r.nextSequence),
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
