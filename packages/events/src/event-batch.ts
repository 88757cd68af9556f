import { createHash } from 'node:crypto';

/**
 * The batch envelope: several events of one subject in one JetStream message, so a relay pays one
 * publish (and JetStream one store and one ack) for a batch of outbox rows instead of one per row.
 *
 * ```json
 * {"events": [<EventEnvelope>, ...], "traceparents": ["00-...", null, ...]}
 * ```
 *
 * Each element of `events` is the EventEnvelope a message of its own would carry; `traceparents`
 * holds each event's trace context (the `traceparent` header of a single message), index by
 * index. The message id (`Nats-Msg-Id`) is `batchMessageId` of the events' ids in their order,
 * which consumers check: JetStream drops a republished identical batch, and a batch cut
 * differently on a retry gets a new id and goes out again (the consumer's inbox then applies each
 * event once). A message with one event is always sent as that plain envelope, and consumers take
 * both forms.
 */
export interface EventBatchBody {
  events: unknown[];
  traceparents?: Array<string | null>;
}

/** The prefix of a batch message id (a plain event's message id is its uuid). */
export const BATCH_ID_PREFIX = 'batch-';

/** The JetStream message id of a batch of events with these ids, in this order. */
export function batchMessageId(ids: readonly string[]): string {
  const h = createHash('sha256');
  for (const id of ids) h.update(id.toLowerCase()).update(',');
  return BATCH_ID_PREFIX + h.digest('hex');
}

/**
 * True when a parsed message body is a batch envelope rather than one event: it has an `events`
 * array and no `id` of its own.
 */
export function isEventBatch(body: unknown): body is EventBatchBody {
  return (
    typeof body === 'object' &&
    body !== null &&
    Array.isArray((body as EventBatchBody).events) &&
    (body as { id?: unknown }).id === undefined
  );
}
