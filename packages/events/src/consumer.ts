import { describeError, extractTraceContext, type Logger, withSpan } from '@custos/service-kit';
import { SpanKind } from '@opentelemetry/api';
import {
  AckPolicy,
  DeliverPolicy,
  type ConsumerMessages,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/nats-core';
import type { NodePgDatabase } from 'drizzle-orm/node-postgres';
import { type EventEnvelope, eventOfSubject } from './catalogue.js';
import type { NatsLink } from './nats.js';
import type { InboxTable } from './tables.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Db = NodePgDatabase<any>;
/** The transaction a handler runs in; the inbox row is written in it too. */
export type HandlerTx = Parameters<Parameters<Db['transaction']>[0]>[0];

/** How an event arrived: its subject and, for an audit record, the service the subject names. */
export interface EventDelivery {
  subject: string;
  /**
   * The producing service of an audit record (`<prefix>.audit.recorded.<producer>`), which NATS
   * permissions pin: only that service's user may publish there. Null for other events.
   */
  producer: string | null;
}

/** Options of an idempotent JetStream consumer. */
export interface ConsumerOptions {
  link: NatsLink;
  stream: string;
  /** Durable consumer name; also the inbox key, so it must be stable across restarts. */
  durable: string;
  /** Subject filter, e.g. `custos.events.policy.>` (NATS 2.9 takes one filter per consumer). */
  filterSubject: string;
  db: Db;
  inbox: InboxTable;
  logger: Logger;
  /** Applies one event; runs inside the transaction that records it as processed. */
  handler: (event: EventEnvelope, tx: HandlerTx, delivery: EventDelivery) => Promise<void>;
  /**
   * Events the handler wants; others are acknowledged without touching the database. For a
   * consumer whose subject filter is wider than what it handles (NATS 2.9 takes one filter).
   */
  accept?: (event: EventEnvelope) => boolean;
  /** Redelivery delay after a failed handler, in milliseconds. */
  retryDelayMs?: number;
  /**
   * A durable this one replaces: when this one is first created, it starts after what that one
   * has acknowledged (its ack floor) instead of at the stream's first event. Events above the floor
   * that the old one also handled come again under the new inbox key: the handler must be
   * idempotent by event id (as the webhook fan-out is, one delivery per webhook and event).
   */
  startAfter?: string;
}

/**
 * Runs `handler` once per event: the event id is inserted into the inbox in the handler's
 * transaction, so a redelivered or republished event finds its id and is only acknowledged.
 *
 * An event is believed only as far as NATS permissions vouch for it: its type must be the one its
 * subject names (only the owning service may publish on that subject), and its id must be its
 * JetStream message id (so a copy of a seen event under a fresh message id cannot take the
 * original's inbox slot). Anything else is dropped with an error log.
 */
export class IdempotentConsumer {
  private messages: ConsumerMessages | undefined;
  private stopped = false;
  private loop: Promise<void> | undefined;

  constructor(private readonly opts: ConsumerOptions) {}

  /** Starts consuming (waits in the background for NATS when it is down). */
  start(): void {
    this.loop ??= this.run();
  }

  /** Stops fetching; the message in hand is finished first. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.messages?.close().catch(() => undefined);
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        const nats = await this.opts.link.ready();
        if (!nats) {
          await new Promise((r) => setTimeout(r, 250));
          continue;
        }
        await this.ensureDurable(nats.jsm);
        const consumer = await nats.js.consumers.get(this.opts.stream, this.opts.durable);
        this.messages = await consumer.consume({ max_messages: 64 });
        if (this.stopped) await this.messages.close();
        for await (const m of this.messages) {
          await this.handle(m);
        }
      } catch (err) {
        if (!this.stopped) {
          this.opts.logger.warn(
            { err: describeError(err), consumer: this.opts.durable },
            'consumer interrupted; resuming',
          );
          await new Promise((r) => setTimeout(r, 500));
        }
      }
    }
  }

  /**
   * Creates the durable when it is missing (after the ack floor of the one it replaces, if any;
   * else at the stream's first event). A durable left by an earlier release with another subject
   * filter is made again with the new filter where it stood: NATS 2.9 takes a filter update but
   * keeps delivering by the old one. Events past its ack floor that it had acknowledged come again
   * and find their inbox rows (same durable, same inbox key).
   */
  private async ensureDurable(jsm: JetStreamManager): Promise<void> {
    const { stream, durable, filterSubject, logger } = this.opts;
    const existing = await jsm.consumers.info(stream, durable).catch(() => undefined);
    if (existing && existing.config.filter_subject === filterSubject) return;
    const from =
      existing ??
      (this.opts.startAfter
        ? await jsm.consumers.info(stream, this.opts.startAfter).catch(() => undefined)
        : undefined);
    if (existing) await jsm.consumers.delete(stream, durable);
    await jsm.consumers.add(stream, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      ...(from
        ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from.ack_floor.stream_seq + 1 }
        : { deliver_policy: DeliverPolicy.All }),
      filter_subject: filterSubject,
      ack_wait: nanos(30_000),
      max_deliver: -1,
    });
    if (from)
      logger.info(
        {
          consumer: durable,
          after: from.name,
          from_seq: from.ack_floor.stream_seq + 1,
          ...(existing ? { old_filter: existing.config.filter_subject, filter: filterSubject } : {}),
        },
        existing
          ? 'consumer made again with its new subject filter'
          : 'consumer created where the one it replaces stopped',
      );
  }

  private async handle(m: JsMsg): Promise<void> {
    let event: EventEnvelope;
    try {
      event = m.json<EventEnvelope>();
      if (typeof event.id !== 'string' || typeof event.type !== 'string')
        throw new Error('not an event envelope');
    } catch (err) {
      this.opts.logger.error({ err: describeError(err), subject: m.subject }, 'dropping malformed event');
      m.term();
      return;
    }
    const where = eventOfSubject(this.opts.link.subjectPrefix, m.subject);
    if (!where || where.name !== event.type) {
      this.opts.logger.error(
        { subject: m.subject, type: event.type, event_id: event.id, consumer: this.opts.durable },
        'dropping an event whose type is not the one its subject names',
      );
      m.term();
      return;
    }
    if (m.headers?.get('Nats-Msg-Id') !== event.id) {
      this.opts.logger.error(
        { subject: m.subject, event_id: event.id, consumer: this.opts.durable },
        'dropping an event whose id is not its message id',
      );
      m.term();
      return;
    }
    const delivery: EventDelivery = { subject: m.subject, producer: where.producer };
    if (this.opts.accept && !this.opts.accept(event)) {
      m.ack();
      return;
    }
    const parent = extractTraceContext({ traceparent: m.headers?.get('traceparent') || undefined });
    try {
      await withSpan(
        `consume ${event.type}`,
        { kind: SpanKind.CONSUMER, parent, attributes: { 'messaging.system': 'nats' } },
        () =>
          this.opts.db.transaction(async (tx) => {
            const fresh = await tx
              .insert(this.opts.inbox)
              .values({ consumer: this.opts.durable, eventId: event.id })
              .onConflictDoNothing()
              .returning({ id: this.opts.inbox.eventId });
            if (fresh.length > 0) await this.opts.handler(event, tx, delivery);
          }),
      );
      m.ack();
    } catch (err) {
      this.opts.logger.warn(
        { err: describeError(err), event_id: event.id, type: event.type },
        'event handler failed; will redeliver',
      );
      m.nak(this.opts.retryDelayMs ?? 1000);
    }
  }
}
