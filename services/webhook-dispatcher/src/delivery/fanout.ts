import { isUuid } from '@custos/service-kit';
import { type EventEnvelope, type HandlerTx, isSubscribableEvent } from '@custos/events';
import { deliveryBody } from '../webhooks/webhook-fns.js';
import type { WebhookStore } from '../webhooks/webhook-store.js';

/**
 * Turns one event into one pending delivery per active webhook of its org subscribed to it. Runs in
 * the consumer's transaction, with the event's inbox row, so an event fans out exactly once.
 */
export async function fanOut(store: WebhookStore, event: EventEnvelope, tx: HandlerTx): Promise<number> {
  // Events of no org (or a malformed one) have no subscribers; they are acknowledged and dropped.
  if (!isSubscribableEvent(event.type) || !event.org_id || !isUuid(event.org_id)) return 0;
  const at = new Date(event.created_at);
  if (Number.isNaN(at.getTime())) return 0;
  const hooks = await store.subscribers(event.org_id, event.type, at, tx);
  if (hooks.length === 0) return 0;
  const body = deliveryBody(event);
  return store.insertDeliveries(
    hooks.map((h) => ({
      webhookId: h.id,
      orgId: event.org_id!,
      eventId: event.id,
      eventType: event.type,
      body,
    })),
    tx,
  );
}
