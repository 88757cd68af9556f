import { type EventEnvelope, type HandlerTx, isSubscribableEvent } from '@custos/events';
import { isUuid } from '@custos/service-kit';
import { deliveryBody } from '../webhooks/webhook-fns.js';
import type { WebhookStore } from '../webhooks/webhook-store.js';

/**
 * Which events the fan-out consumers take: those webhooks can subscribe to (SPEC.md §6). Their
 * durables, one per family of these events, are FANOUT_CONSUMERS of @custos/events (the one source
 * of what each service may read on NATS).
 */
export const acceptsEvent = (event: EventEnvelope): boolean => isSubscribableEvent(event.type);

/**
 * The handler of every subscribable event: one pending delivery per active webhook of its org
 * subscribed to it. It runs in the consumer's transaction, with the event's inbox row, so an
 * event fans out exactly once. Returns how many deliveries it made.
 */
export function subscribableEventConsumer(deps: {
  store: Pick<WebhookStore, 'subscribers' | 'insertDeliveries'>;
}): (event: EventEnvelope, tx: HandlerTx) => Promise<number> {
  return async (event, tx) => {
    // Events of no org (or a malformed one) have no subscribers; they are acknowledged and dropped.
    if (!isSubscribableEvent(event.type) || !event.org_id || !isUuid(event.org_id)) return 0;
    const at = new Date(event.created_at);
    if (Number.isNaN(at.getTime())) return 0;
    const hooks = await deps.store.subscribers(event.org_id, event.type, at, tx);
    if (hooks.length === 0) return 0;
    const body = deliveryBody(event);
    return deps.store.insertDeliveries(
      hooks.map((h) => ({
        webhookId: h.id,
        orgId: event.org_id!,
        eventId: event.id,
        eventType: event.type,
        body,
      })),
      tx,
    );
  };
}
