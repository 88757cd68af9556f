import {
  type AuditRecordData,
  type BatchHandler,
  type EventDelivery,
  type EventEnvelope,
  type HandlerTx,
  isNatsService,
} from '@custos/events';
import { type Logger, isUuid } from '@custos/service-kit';
import type { AuditService } from '../chain/audit-service.js';
import { ACTION_NAME, foldContext } from '../chain/chain-fns.js';
import type { NewRecord } from '../chain/audit-store.js';
import { mayRecord } from './audit-producers.js';

/** The durable name of the `audit.recorded` consumer (also its inbox key: never change it). */
export const AUDIT_RECORDED_DURABLE = 'audit-chain';

const ACTOR_TYPES = new Set(['user', 'agent', 'system', 'anonymous']);

/**
 * The record an `audit.recorded` event carries, checked: a malformed one is a bug in the service
 * that wrote it and is refused loudly (the consumer retries it and logs each failure).
 */
export function recordFromEvent(event: EventEnvelope, producer: string): NewRecord {
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
    producer,
  };
}

/** Counts records refused because their producer may not record their action. */
export interface RefusedRecords {
  inc(labels: { producer: string }): void;
}

/** What the handlers of `audit.recorded` use. */
interface AuditRecordedDeps {
  audit: Pick<AuditService, 'chain' | 'chainBatch'>;
  logger: Logger;
  refused: RefusedRecords;
}

/**
 * The record an event carries if its producer may record its action, else undefined (refused:
 * logged and counted; its inbox row is written, so it is not delivered again). Checked before
 * decoding: a producer's malformed record throws and is retried (its bug, logged each time), but
 * another service's record it may not send is refused once, whatever its shape.
 */
function acceptedRecord(
  deps: AuditRecordedDeps,
  event: EventEnvelope,
  delivery: EventDelivery,
): NewRecord | undefined {
  const action = (event.data as { action?: unknown }).action;
  const producer = delivery.producer;
  if (!producer || typeof action !== 'string' || !mayRecord(producer, action)) {
    // Bounded label: an unknown producer token (NATS without permissions) counts as `unknown`.
    deps.refused.inc({ producer: producer && isNatsService(producer) ? producer : 'unknown' });
    deps.logger.warn(
      {
        producer,
        action: typeof action === 'string' ? action.slice(0, 100) : null,
        org_id: event.org_id,
        event_id: event.id,
      },
      'audit record refused: its producer may not record this action',
    );
    return undefined;
  }
  return recordFromEvent(event, producer);
}

/**
 * The handler of `audit.recorded`, one event per transaction: decode the record and chain it in
 * the inbox transaction, with the producer its subject names. A record whose producer may not
 * record its action (only vault-crypto records `secret.read`; see audit-producers.ts) is refused:
 * not chained, logged and counted, and acknowledged (its inbox row is written) so it is not
 * delivered again.
 */
export function auditRecordedConsumer(
  deps: AuditRecordedDeps,
): (event: EventEnvelope, tx: HandlerTx, delivery: EventDelivery) => Promise<void> {
  return async (event, tx, delivery) => {
    const record = acceptedRecord(deps, event, delivery);
    if (record) await deps.audit.chain(tx, record);
  };
}

/**
 * The batch handler of `audit.recorded` (what the service runs): the same checks per record as
 * `auditRecordedConsumer`, then the accepted records are chained together in the batch's inbox
 * transaction, each org's in delivery order. A malformed record fails the batch; the consumer
 * then applies its events one at a time, so only that record is retried.
 */
export function auditRecordedBatchConsumer(deps: AuditRecordedDeps): BatchHandler {
  return async (events, client) => {
    const records: NewRecord[] = [];
    for (const { event, delivery } of events) {
      const record = acceptedRecord(deps, event, delivery);
      if (record) records.push(record);
    }
    await deps.audit.chainBatch(client, records);
  };
}
