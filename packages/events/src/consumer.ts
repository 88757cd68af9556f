import {
  describeError,
  extractTraceContext,
  isUuid,
  type Logger,
  withPgTransaction,
  withSpan,
} from '@custos/service-kit';
import { SpanKind } from '@opentelemetry/api';
import {
  AckPolicy,
  DeliverPolicy,
  type ConsumerMessages,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/nats-core';
import { trace, type Link } from '@opentelemetry/api';
import type { NodePgDatabase } from 'drizzle-orm/node-postgres';
import { getTableConfig } from 'drizzle-orm/pg-core';
import type pg from 'pg';
import { type EventEnvelope, type EventSubject, eventOfSubject } from './catalogue.js';
import { batchMessageId, isEventBatch } from './event-batch.js';
import { consumerMetricsOf, trackConsumer, untrackConsumer, type DropReason } from './event-metrics.js';
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

/** The transaction a batch handler runs in: a raw `pg` client inside BEGIN (prepared statements welcome). */
export type BatchTx = pg.PoolClient;

/** One event of a batch, with how it arrived, in delivery order. */
export interface ConsumedEvent {
  event: EventEnvelope;
  delivery: EventDelivery;
}

/**
 * Applies a batch of events (the fresh ones only: already-applied ids are left out) inside the
 * transaction that records them as processed. Throwing rolls the whole batch back.
 */
export type BatchHandler = (events: ConsumedEvent[], client: BatchTx) => Promise<void>;

interface CommonConsumerOptions {
  link: NatsLink;
  stream: string;
  /** Durable consumer name; also the inbox key, so it must be stable across restarts. */
  durable: string;
  /** Subject filter, e.g. `custos.events.policy.>` (NATS 2.9 takes one filter per consumer). */
  filterSubject: string;
  db: Db;
  inbox: InboxTable;
  logger: Logger;
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

/** Options of an idempotent JetStream consumer that applies one event per transaction. */
export interface SingleConsumerOptions extends CommonConsumerOptions {
  /** Applies one event; runs inside the transaction that records it as processed. */
  handler: (event: EventEnvelope, tx: HandlerTx, delivery: EventDelivery) => Promise<void>;
  batchHandler?: never;
}

/**
 * Options of a consumer that applies the events at hand together: up to `maxBatch` that have
 * arrived, in one transaction. A failed batch is retried one event per transaction, so a
 * poison event is redelivered alone and does not hold the others back.
 */
export interface BatchConsumerOptions extends CommonConsumerOptions {
  batchHandler: BatchHandler;
  /** The pool batches run on (as raw `pg`, with prepared statements). */
  pool: pg.Pool;
  /** Events in one batch at most. Default 256. */
  maxBatch?: number;
  /**
   * Messages NATS may hand over ahead of the consumer's own buffer (the pull's `max_messages`).
   * Messages can be batch envelopes of up to a few hundred events (the relay's batch size): the
   * ones waiting in the client must be applied within the ack wait (30 s), or they come again
   * while still queued. Default 32: at most ~6,400 events of envelopes waiting; the buffer keeps
   * reading while a batch is applied, so batches of single events still reach `maxBatch`.
   * (A byte bound, `max_bytes`, was tried: nats.js refills with partial pulls that a message
   * larger than the remainder answers with 409 until the client catches up.)
   */
  maxPendingMessages?: number;
  handler?: never;
}

/** Options of an idempotent JetStream consumer. */
export type ConsumerOptions = SingleConsumerOptions | BatchConsumerOptions;

/** Messages a batch consumer lets NATS hand over ahead of its buffer (BatchConsumerOptions). */
export const DEFAULT_MAX_PENDING_MESSAGES = 32;

/** An event that passed the envelope checks, with its trace context. */
interface Checked extends ConsumedEvent {
  traceparent: string | undefined;
}

/**
 * A delivered message and its events that passed the checks: one, or several of a batch envelope
 * (event-batch.ts). The message is acknowledged once all of them are applied.
 */
interface Delivered {
  m: JsMsg;
  events: Checked[];
}

/** Why an event is not applied: dropped (with an error log, counted by reason), or not one this consumer wants. */
type Verdict = Checked | { dropped: DropReason } | 'ignored';

/**
 * Runs `handler` once per event: the event id is inserted into the inbox in the handler's
 * transaction, so a redelivered or republished event finds its id and is only acknowledged. With
 * `batchHandler` instead, the events at hand (up to `maxBatch`, without waiting for more) are
 * applied in one transaction: their ids go into the inbox in one statement and only the fresh ones
 * reach the handler, in delivery order; all are acknowledged after the commit. A batch that fails is
 * applied again one event per transaction, so only the failing event is redelivered.
 *
 * A message may carry several events of its subject (a batch envelope, event-batch.ts, as the
 * outbox relay sends audit records): each is checked and applied as if it had come alone, and the
 * message is acknowledged once all of them are applied, or redelivered when one failed (the inbox
 * then skips those that were applied).
 *
 * An event is believed only as far as NATS permissions vouch for it: its type must be the one its
 * subject names (only the owning service may publish on that subject), and its id must be its
 * JetStream message id, or for a batch the message id must be the batch id of its events' ids
 * (so a copy of a seen event under a fresh message id cannot take the original's inbox slot).
 * Anything else is dropped with an error log.
 */
export class IdempotentConsumer {
  private messages: ConsumerMessages | undefined;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private readonly maxBatch: number;
  private readonly inboxInsert: { name: string; text: string } | undefined;

  constructor(private readonly opts: ConsumerOptions) {
    this.maxBatch = opts.batchHandler ? (opts.maxBatch ?? 256) : 1;
    if (opts.batchHandler) {
      const t = getTableConfig(opts.inbox);
      const quote = (n: string) => `"${n.replace(/"/g, '""')}"`;
      const table = t.schema ? `${quote(t.schema)}.${quote(t.name)}` : quote(t.name);
      this.inboxInsert = {
        // Prepared once per connection; the text depends only on the table.
        name: `custos_inbox_batch_${t.schema ?? ''}_${t.name}`,
        text:
          `INSERT INTO ${table} (consumer, event_id) SELECT $1, unnest($2::uuid[]) ` +
          'ON CONFLICT DO NOTHING RETURNING event_id',
      };
    }
  }

  /** Starts consuming (waits in the background for NATS when it is down). */
  start(): void {
    trackConsumer(this.opts.link, this.opts.stream, this.opts.durable);
    this.loop ??= this.run();
  }

  /** Stops fetching; the messages in hand are finished first. */
  async stop(): Promise<void> {
    this.stopped = true;
    untrackConsumer(this.opts.link, this.opts.stream, this.opts.durable);
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
        this.messages = await consumer.consume(
          this.opts.batchHandler
            ? { max_messages: this.opts.maxPendingMessages ?? DEFAULT_MAX_PENDING_MESSAGES }
            : { max_messages: 64 },
        );
        if (this.stopped) await this.messages.close();
        if (this.opts.batchHandler) {
          await this.consumeBatches(this.messages);
        } else {
          for await (const m of this.messages) {
            await this.handle(m);
          }
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

  /**
   * Takes messages as they arrive into a buffer while the previous batch is being applied, and
   * applies what is there (up to maxBatch) as soon as the previous one is done: no added wait when
   * one message is there, bigger batches when messages come faster than a commit. The reader stops
   * pulling while a full batch waits, so unacknowledged messages stay bounded.
   */
  private async consumeBatches(messages: ConsumerMessages): Promise<void> {
    // Checked as they arrive; counted in events (a batch envelope carries several).
    const buffer: Delivered[] = [];
    let buffered = 0;
    let done = false;
    let wakeWorker: (() => void) | undefined;
    let wakeReader: (() => void) | undefined;
    const reader = (async () => {
      try {
        for await (const m of messages) {
          const d = this.check(m);
          if (!d) continue;
          buffer.push(d);
          buffered += d.events.length;
          wakeWorker?.();
          if (buffered >= this.maxBatch) await new Promise<void>((r) => (wakeReader = r));
        }
      } finally {
        done = true;
        wakeWorker?.();
      }
    })();
    try {
      for (;;) {
        if (buffer.length === 0) {
          if (done) break;
          await new Promise<void>((r) => (wakeWorker = r));
          wakeWorker = undefined;
          continue;
        }
        // Let the messages NATS has already handed over reach the buffer before taking a batch.
        await new Promise((r) => setImmediate(r));
        // Whole messages, up to maxBatch events (at least one message, however many it carries).
        let take = 0;
        let events = 0;
        while (take < buffer.length && (take === 0 || events + buffer[take]!.events.length <= this.maxBatch))
          events += buffer[take++]!.events.length;
        const batch = buffer.splice(0, take);
        buffered -= events;
        wakeReader?.();
        wakeReader = undefined;
        await this.handleBatch(batch);
      }
    } catch (err) {
      // The connection failed under an ack: stop this subscription (its unacknowledged messages
      // come again) before run() opens a new one, so no reader is left filling a dead buffer.
      await messages.close().catch(() => undefined);
      wakeReader?.();
      await reader.catch(() => undefined);
      throw err;
    }
    await reader;
  }

  /**
   * The checks every message and event passes before it is applied. A message that is not JSON,
   * or whose id is not its event's id (for a batch: the batch id of its events' ids), is
   * terminated (never redelivered); so is a plain event that is malformed or whose type is not
   * the one its subject names, while such an event inside a batch is dropped alone. Events the
   * consumer does not accept are left out. Returns the message with its events to apply, or
   * undefined when it has been settled here (terminated, or acknowledged: nothing to apply).
   */
  private check(m: JsMsg): Delivered | undefined {
    let body: unknown;
    try {
      body = m.json<unknown>();
    } catch (err) {
      this.opts.logger.error({ err: describeError(err), subject: m.subject }, 'dropping malformed event');
      this.drop(m, 'malformed', 1);
      return undefined;
    }
    const where = eventOfSubject(this.opts.link.subjectPrefix, m.subject);
    const msgId = m.headers?.get('Nats-Msg-Id');
    if (!isEventBatch(body)) {
      const v = this.checkEvent(m.subject, where, body, m.headers?.get('traceparent') || undefined, msgId);
      if (v === 'ignored') m.ack();
      else if ('dropped' in v) this.drop(m, v.dropped, 1);
      else return { m, events: [v] };
      return undefined;
    }
    const ids = body.events.map((e) => (e as { id?: unknown } | null)?.id);
    if (!ids.every((id): id is string => typeof id === 'string')) {
      this.opts.logger.error({ subject: m.subject }, 'dropping malformed event batch');
      this.drop(m, 'malformed', Math.max(1, body.events.length));
      return undefined;
    }
    if (msgId !== batchMessageId(ids)) {
      this.opts.logger.error(
        { subject: m.subject, events: ids.length, consumer: this.opts.durable },
        'dropping an event whose id is not its message id',
      );
      this.drop(m, 'id_mismatch', Math.max(1, ids.length));
      return undefined;
    }
    const events: Checked[] = [];
    const traceparents: unknown[] = Array.isArray(body.traceparents) ? body.traceparents : [];
    body.events.forEach((e, i) => {
      const tp = traceparents[i];
      const v = this.checkEvent(m.subject, where, e, typeof tp === 'string' && tp ? tp : undefined, null);
      // An event of a batch is dropped alone: the message is still acknowledged for the others.
      if (v === 'ignored') return;
      if ('dropped' in v) consumerMetricsOf(this.opts.link)?.dropped(this.opts.durable, v.dropped, 1);
      else events.push(v);
    });
    if (events.length === 0) {
      m.ack();
      return undefined;
    }
    return { m, events };
  }

  /** Terminates `m` (never redelivered) and counts its `events` as dropped for `reason`. */
  private drop(m: JsMsg, reason: DropReason, events: number): void {
    consumerMetricsOf(this.opts.link)?.dropped(this.opts.durable, reason, events);
    m.term();
  }

  /**
   * One event's checks (see check): the event, or why it is not applied (dropped ones logged).
   * `msgId` is the message id a plain event's id must equal; null inside a batch (checked whole).
   */
  private checkEvent(
    subject: string,
    where: EventSubject | undefined,
    body: unknown,
    traceparent: string | undefined,
    msgId: string | undefined | null,
  ): Verdict {
    const event = body as EventEnvelope;
    try {
      if (typeof event !== 'object' || event === null) throw new Error('not an event envelope');
      if (typeof event.id !== 'string' || typeof event.type !== 'string')
        throw new Error('not an event envelope');
      // The inbox keys events by uuid; an id that is not one could never be recorded as applied.
      if (!isUuid(event.id)) throw new Error('event id is not a uuid');
    } catch (err) {
      this.opts.logger.error({ err: describeError(err), subject }, 'dropping malformed event');
      return { dropped: 'malformed' };
    }
    if (!where || where.name !== event.type) {
      this.opts.logger.error(
        { subject, type: event.type, event_id: event.id, consumer: this.opts.durable },
        'dropping an event whose type is not the one its subject names',
      );
      return { dropped: 'type_mismatch' };
    }
    if (msgId !== null && msgId !== event.id) {
      this.opts.logger.error(
        { subject, event_id: event.id, consumer: this.opts.durable },
        'dropping an event whose id is not its message id',
      );
      return { dropped: 'id_mismatch' };
    }
    if (this.opts.accept && !this.opts.accept(event)) return 'ignored';
    return { event, delivery: { subject, producer: where.producer }, traceparent };
  }

  private async handle(m: JsMsg): Promise<void> {
    const d = this.check(m);
    if (!d) return;
    let failed = false;
    for (const c of d.events) {
      try {
        await this.applyOne(c);
      } catch (err) {
        failed = true;
        this.logFailed(c, err);
      }
    }
    if (failed) m.nak(this.opts.retryDelayMs ?? 1000);
    else m.ack();
  }

  private async applyOne({ event, delivery, traceparent }: Checked): Promise<void> {
    const handler = this.opts.handler!;
    const parent = extractTraceContext({ traceparent });
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
          if (fresh.length > 0) await handler(event, tx, delivery);
          return fresh.length > 0;
        }),
    ).then((applied) => {
      if (applied) consumerMetricsOf(this.opts.link)?.applied(this.opts.durable, [event.created_at]);
    });
  }

  private async handleBatch(batch: Delivered[]): Promise<void> {
    const all = batch.flatMap((d) => d.events);
    try {
      await this.applyBatch(all);
      for (const d of batch) d.m.ack();
      return;
    } catch (err) {
      if (all.length === 1) {
        this.logFailed(all[0]!, err);
        batch[0]!.m.nak(this.opts.retryDelayMs ?? 1000);
        return;
      }
      this.opts.logger.warn(
        { err: describeError(err), consumer: this.opts.durable, events: all.length },
        'event batch failed; applying its events one at a time',
      );
    }
    // One per transaction, in delivery order: only a message with an event that fails again is
    // redelivered (its other events are in the inbox by then and are not applied twice).
    for (const d of batch) {
      let failed = false;
      for (const c of d.events) {
        try {
          await this.applyBatch([c]);
        } catch (err) {
          failed = true;
          this.logFailed(c, err);
        }
      }
      if (failed) d.m.nak(this.opts.retryDelayMs ?? 1000);
      else d.m.ack();
    }
  }

  private logFailed(c: Checked, err: unknown): void {
    consumerMetricsOf(this.opts.link)?.failed(this.opts.durable, 1);
    this.opts.logger.warn(
      { err: describeError(err), event_id: c.event.id, type: c.event.type },
      'event handler failed; will redeliver',
    );
  }

  /** Records the events' ids in the inbox and applies the fresh ones, in one transaction. */
  private async applyBatch(items: Checked[]): Promise<void> {
    const opts = this.opts as BatchConsumerOptions;
    const links: Link[] = [];
    for (const { traceparent } of items) {
      const ctx = traceparent ? trace.getSpanContext(extractTraceContext({ traceparent })) : undefined;
      if (ctx) links.push({ context: ctx });
    }
    await withSpan(
      items.length === 1 ? `consume ${items[0]!.event.type}` : `consume ${items.length} events`,
      {
        kind: SpanKind.CONSUMER,
        links,
        attributes: { 'messaging.system': 'nats', 'messaging.batch.message_count': items.length },
      },
      () =>
        withPgTransaction(opts.pool, async (client) => {
          const { rows } = await client.query<{ event_id: string }>({
            ...this.inboxInsert!,
            // In id order, not delivery order: two replicas inserting overlapping redeliveries
            // then take the inbox rows' locks in the same order and cannot deadlock.
            values: [this.opts.durable, items.map((c) => c.event.id.toLowerCase()).sort()],
          });
          // Postgres returns ids in lower case; an id twice in the batch is applied once.
          const fresh = new Set(rows.map((r) => r.event_id));
          const apply = items.filter((c) => fresh.delete(c.event.id.toLowerCase()));
          if (apply.length > 0)
            await opts.batchHandler(
              apply.map(({ event, delivery }) => ({ event, delivery })),
              client,
            );
          return apply;
        }),
    ).then((applied) => {
      if (applied.length > 0)
        consumerMetricsOf(this.opts.link)?.applied(
          this.opts.durable,
          applied.map((c) => c.event.created_at),
        );
    });
  }
}
