import { randomUUID } from 'node:crypto';
import { injectTraceContext } from '@custos/service-kit';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import type { EventName } from './catalogue.js';
import type { OutboxTable } from './tables.js';

/** The largest `data` an event may carry (the envelope and headers need the rest of NATS's 1 MiB). */
export const MAX_EVENT_DATA_BYTES = 512 * 1024;

/** Anything that can run a Drizzle insert: the database or a transaction. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Executor = PgDatabase<PgQueryResultHKT, any, any>;

/**
 * Writes an event to the outbox inside the caller's transaction. The event is published only if
 * that transaction commits; the returned id is the event id (and the JetStream message id).
 */
export async function writeEvent(
  tx: Executor,
  table: OutboxTable,
  event: { name: EventName; orgId: string | null; data: Record<string, unknown> },
): Promise<string> {
  // NATS refuses messages over 1 MiB; a row that can never be published would block the relay.
  const size = Buffer.byteLength(JSON.stringify(event.data));
  if (size > MAX_EVENT_DATA_BYTES)
    throw new Error(`event ${event.name} data is ${size} bytes; at most ${MAX_EVENT_DATA_BYTES}`);
  const id = randomUUID();
  const carrier: Record<string, string> = {};
  injectTraceContext(carrier);
  await tx.insert(table).values({
    id,
    name: event.name,
    orgId: event.orgId,
    payload: event.data,
    traceparent: carrier['traceparent'] ?? null,
  });
  return id;
}
