import { randomUUID } from 'node:crypto';
import { type IdentityKeys, currentCaller } from '@custos/auth';
import { auditRecordData } from '@custos/events';
import type { AuditServiceServer } from '@custos/proto/custos/audit/v1/service';
import { type AsyncService, currentRequestContext } from '@custos/service-kit';
import type { AuditService } from '../chain/audit-service.js';

/** gRPC adapter of AuditService: verify the caller, decode, call the rules, encode. */
export function auditGrpc(deps: {
  keys: IdentityKeys;
  audit: AuditService;
}): AsyncService<AuditServiceServer> {
  const caller = () => currentCaller(deps.keys);
  return {
    async listEvents(req) {
      const r = await deps.audit.list(await caller(), {
        limit: req.limit,
        offset: req.offset,
        action: req.action,
      });
      return { events: r.events, count: String(r.count) };
    },
    async verify() {
      return { result: await deps.audit.verify(await caller()) };
    },
    async recordEvent(req) {
      const p = await caller();
      const ctx = currentRequestContext();
      // The same secret-key screen the outbox path applies.
      const metadata = auditRecordData({
        orgId: p.orgId,
        actorType: p.kind,
        actorId: null,
        action: req.action,
        resourceType: req.resourceType,
        resourceId: null,
        metadata: req.metadata ?? {},
      }).metadata;
      const id = await deps.audit.record(p, {
        id: randomUUID(),
        action: req.action,
        resourceType: req.resourceType,
        resourceId: req.resourceId,
        metadata,
        clientIp: ctx?.clientIp ?? null,
        requestId: ctx?.requestId ?? null,
      });
      return { id };
    },
  };
}
