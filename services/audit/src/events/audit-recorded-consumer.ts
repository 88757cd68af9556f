import type { AuditRecordData, EventEnvelope, HandlerTx } from '@custos/events';
import { isUuid } from '@custos/service-kit';
import type { AuditService } from '../chain/audit-service.js';
import { ACTION_NAME, foldContext } from '../chain/chain-fns.js';
import type { NewRecord } from '../chain/audit-store.js';

/** The durable name of the `audit.recorded` consumer (also its inbox key: never change it). */
export const AUDIT_RECORDED_DURABLE = 'audit-chain';

const ACTOR_TYPES = new Set(['user', 'agent', 'system', 'anonymous']);

/**
 * The record an `audit.recorded` event carries, checked: a malformed one is a bug in the service
 * that wrote it and is refused loudly (the consumer retries it and logs each failure).
 */
export function recordFromEvent(event: EventEnvelope): NewRecord {
  const d = event.data as unknown as Partial<AuditRecordData>;
  const problems: string[] = [];
  if (typeof d.org_id !== 'string' || !isUuid(d.org_id)) problems.push('org_id');
  if (typeof d.actor_type !== 'string' || !ACTOR_TYPES.has(d.actor_type)) problems.push('actor_type');
  if (d.actor_id !== null && typeof d.actor_id !== 'string') problems.push('actor_id');
  if (typeof d.action !== 'string' || !ACTION_NAME.test(d.action)) problems.push('action');
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
    metadata: foldContext(d.metadata!, d.client_ip ?? null, d.request_id ?? null),
    createdAt: at,
  };
}

/** The handler of `audit.recorded`: decode the record, chain it in the inbox transaction. */
export function auditRecordedConsumer(deps: {
  audit: Pick<AuditService, 'chain'>;
}): (event: EventEnvelope, tx: HandlerTx) => Promise<void> {
  return (event, tx) => deps.audit.chain(tx, recordFromEvent(event));
}
