import { describeError, type Logger } from '@custos/service-kit';
import { DiscardPolicy, type JetStreamManager } from '@nats-io/jetstream';
import { headers } from '@nats-io/nats-core';
import type pg from 'pg';
import { AUDIT_RECORDED, subjectFor, type EventEnvelope, type EventName } from './catalogue.js';
import { batchMessageId } from './event-batch.js';
import { relayMetricsOf } from './event-metrics.js';
import type { NatsLink } from './nats.js';
import {
  publishBackoffMs,
  publishFailureReason,
  type PublishFailureReason,
} from './outbox-publish-failure.js';

/** Options of an outbox relay. */
export interface RelayOptions {
  pool: pg.Pool;
  /** The Postgres schema that holds the `outbox` table. */
  schema: string;
  link: NatsLink;
  subjectPrefix: string;
  /** The service whose outbox this is: its audit records go out on `audit.recorded.<producer>`. */
  producer: string;
  logger: Logger;
  batchSize?: number;
  /** Polling interval when idle, in milliseconds (a commit can also `nudge()` the relay). */
  pollMs?: number;
  /**
   * Cycles begin at most this often when nudged, in milliseconds: nudges that come faster (one per
   * committed write under load) are folded into one cycle, which publishes all their rows and marks
   * them in one UPDATE. Full batches are still published back to back. Default 20.
   */
  minCycleMs?: number;
  /**
   * Events that go out several to a message (the batch envelope of event-batch.ts) when a cycle
   * holds more than one of a subject. Only events whose every consumer reads batch envelopes (an
   * IdempotentConsumer does) belong here. Default: audit records, which only audit consumes.
   */
  batchedEvents?: readonly string[];
  /** Bytes of one batch message at most; an event that alone is larger goes out alone. Default 256 KiB. */
  maxMessageBytes?: number;
  /**
   * Published outbox rows are deleted this long after publishing, by the relay leader every
   * `pruneEveryMs`, in rounds of 5,000 rows for at most `pruneBudgetMs` at a time (so publishing
   * is never held up for long). Default 24 h: far beyond JetStream's 2 h duplicate window, and a
   * never-pruned outbox also made the relay's mark UPDATE slow. Inbox rows are kept: they are what
   * makes a replay of any age apply once, and they grow no faster than the audit log itself.
   */
  publishedRetentionMs?: number;
  /** How often the leader prunes, in ms. Default 10 s. */
  pruneEveryMs?: number;
  /** How long one prune may run, in ms. Default 250. */
  pruneBudgetMs?: number;
  /**
   * After a cycle that could not publish (a refusal, a timeout, a Postgres error) the next waits
   * this long, doubled per further failed cycle up to `maxBackoffMs`; nudges do not shorten it.
   * Defaults 500 ms and 30 s.
   */
  backoffMs?: number;
  maxBackoffMs?: number;
  /**
   * A cycle is pipelined only while the stream (when it has a byte limit with discard new) has at
   * least this many bytes of room beyond the cycle's own messages; closer to full it goes one
   * message at a time, so a message the stream refuses is never overtaken by a later, smaller one.
   * The room is read from the stream's info at most every `roomReadMs` (default 1 s) and lowered by
   * what the relay publishes meanwhile; the margin covers what other services publish in that time.
   * Default: 4 MiB or 2 % of the limit, whichever is more.
   */
  pipelineMarginBytes?: number;
  roomReadMs?: number;
}

interface OutboxRow {
  id: string;
  name: string;
  org_id: string | null;
  /** The payload as JSON text: it goes out as it is, without a parse and a stringify per row. */
  payload: string;
  traceparent: string | null;
  created_at: Date;
}

/**
 * Publishes outbox rows to JetStream in insertion order (`seq`), using the row id as the message id so that
 * JetStream drops a republished row; marks them published afterwards. Only one relay per schema is
 * active at a time (a session advisory lock), so replicas do not race. NATS or Postgres outages only
 * delay publication: rows stay until they are acknowledged.
 *
 * Order under refusals: a stream with a byte limit refuses a message that does not fit (discard
 * new) while a later, smaller one may still fit. A cycle therefore publishes its messages pipelined
 * only while the previous cycle published everything and the stream has room for them beyond a
 * margin (RelayOptions.pipelineMarginBytes); otherwise (from the first refusal on, in the first
 * cycle after start, near a full stream) it publishes one message at a time and stops at the first
 * that fails, so nothing after a refused row is stored, until a cycle publishes its whole batch. Only the rows
 * before the first failure are marked published. A failed cycle is retried after an exponential
 * backoff (RelayOptions.backoffMs); the failure is logged when it starts, changes reason or ends,
 * and every refused message is counted in `custos_outbox_publish_failures_total{reason}`. Only
 * the leader's own failed cycles back off: a replica that does not get the lock polls at its pace
 * and drops a failure left from its earlier leadership without logging its end.
 *
 * Two exceptions to that order remain:
 * - A batched event (audit records, several to a message) goes out in the slot of the batch's
 *   first row: within its subject the order holds, but across subjects a batched row may be stored
 *   before a row of another subject written ahead of it. And a batch stored behind a refused row is
 *   not marked (only the acknowledged prefix is): its rows go out again later, perhaps in a batch of
 *   other rows (another message id, so JetStream does not drop it); audit's inbox drops the repeat.
 * - The room check sees only a byte limit with discard new (`max_bytes`). JetStream storage or
 *   account exhaustion, and a message limit (`max_msgs`) an operator set, are not predicted: the
 *   first cycle that meets them may still be pipelined, and a later message of it may be stored
 *   ahead of a refused one. From that refusal on the relay goes one message at a time as above.
 */
export class OutboxRelay {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private leader: pg.PoolClient | undefined;
  /** The error listener on the leader's connection (see lead()). */
  private leaderOnError: ((err: Error) => void) | undefined;
  private wake: (() => void) | undefined;
  private nudged = false;
  private readonly batchSize: number;
  private readonly pollMs: number;
  private readonly minCycleMs: number;
  private readonly select: { name: string; text: string };
  private readonly mark: { text: string };
  private readonly batched: ReadonlySet<string>;
  private readonly maxMessageBytes: number;
  /**
   * One message at a time, stopping at the first failure: after a failed publish, and at start
   * (the stream may already be full), until a cycle publishes its whole batch.
   */
  private serial = true;
  /** Consecutive failed cycles (publish or Postgres), for the backoff. */
  private failedCycles = 0;
  /** The publish failure in progress, for logging its start, a change of reason and its end. */
  private failing: { since: number; reason: PublishFailureReason; refused: number } | undefined;
  /** The stream the relay publishes to (from its acknowledgements), for reading its room. */
  private streamName: string | undefined;
  /** The stream's room when last read (Infinity without a byte limit), lowered by what was published since. */
  private room: { left: number; margin: number; at: number } | undefined;

  constructor(private readonly opts: RelayOptions) {
    this.batchSize = opts.batchSize ?? 200;
    this.batched = new Set(opts.batchedEvents ?? [AUDIT_RECORDED]);
    // NATS refuses a message over its max_payload (1 MiB unless configured lower).
    this.maxMessageBytes = opts.maxMessageBytes ?? 256 * 1024;
    this.pollMs = opts.pollMs ?? 250;
    this.minCycleMs = opts.minCycleMs ?? 20;
    const schema = `"${opts.schema.replace(/"/g, '""')}"`;
    // The select is prepared once on the leader's connection (named), not parsed every cycle.
    this.select = {
      name: `custos_relay_select_${opts.schema}`,
      text:
        `SELECT id, name, org_id, payload::text AS payload, traceparent, created_at FROM ${schema}.outbox ` +
        'WHERE published_at IS NULL ORDER BY seq LIMIT $1',
    };
    // Unnamed, so planned for each cycle's ids: a named statement keeps the generic plan chosen
    // in its first executions, when the outbox is small, and that plan is a sequential scan — it
    // then reads the whole (ever-growing) table every cycle (measured: 3.4–4.3 ms per mark of 30
    // rows of a 20,000-row outbox, round trip included, against 0.7–1.2 ms planned each time).
    this.mark = {
      text: `UPDATE ${schema}.outbox SET published_at = now() WHERE id = ANY($1::uuid[])`,
    };
  }

  /** Starts the publish loop. */
  start(): void {
    this.running ??= this.loop();
  }

  /**
   * Asks the loop to look for rows soon (call after committing an outbox write): at once when the
   * last cycle began at least `minCycleMs` ago, else when that much has passed. Cheap to call per
   * commit; nudges between two cycles make one cycle.
   */
  nudge(): void {
    this.nudged = true;
    this.wake?.();
  }

  /** Stops the loop after the batch in flight, and releases leadership. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.nudge();
    if (this.timer) clearTimeout(this.timer);
    await this.running;
    await this.resign();
  }

  private lastPrune = 0;

  /**
   * Deletes published outbox rows past their retention (RelayOptions.publishedRetentionMs) on the
   * leader's connection: rounds of 5,000 until a round deletes fewer or the budget is spent.
   * Returns how many it deleted.
   */
  async prune(now = Date.now()): Promise<number> {
    const client = this.leader;
    if (!client) return 0;
    this.lastPrune = now;
    // The budget counts from here, not from the cycle's start (publishing came first).
    const started = Date.now();
    const schema = `"${this.opts.schema.replace(/"/g, '""')}"`;
    const budgetMs = this.opts.pruneBudgetMs ?? 250;
    let deleted = 0;
    for (;;) {
      const r = await client.query(
        `DELETE FROM ${schema}.outbox WHERE seq IN (
           SELECT seq FROM ${schema}.outbox
           WHERE published_at IS NOT NULL AND published_at < now() - make_interval(secs => $1::double precision / 1000)
           ORDER BY seq LIMIT 5000)`,
        [this.opts.publishedRetentionMs ?? 24 * 3600_000],
      );
      deleted += r.rowCount ?? 0;
      if ((r.rowCount ?? 0) < 5000 || Date.now() - started >= budgetMs) return deleted;
    }
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      const began = Date.now();
      this.nudged = false;
      let published = 0;
      let failed: boolean;
      try {
        // Whether this cycle failed, not whether a failure is still on record: a replica that is
        // not (or no longer) the leader must keep polling at its pace to take over in time.
        ({ published, failed } = await this.cycle());
        if (this.leader && began - this.lastPrune >= (this.opts.pruneEveryMs ?? 10_000)) {
          const pruned = await this.prune(began);
          if (pruned > 0) this.opts.logger.debug({ pruned }, 'pruned published outbox rows');
        }
      } catch (err) {
        failed = true;
        this.opts.logger.warn({ err: describeError(err) }, 'outbox relay cycle failed; will retry');
        await this.resign();
      }
      this.failedCycles = failed ? this.failedCycles + 1 : 0;
      if (failed && !this.stopped) {
        // A refusal or an outage lasts: wait, doubling, and let no nudge cut the wait short.
        const wait = publishBackoffMs(
          this.failedCycles,
          this.opts.backoffMs ?? 500,
          this.opts.maxBackoffMs ?? 30_000,
        );
        await this.sleep(wait - (Date.now() - began), false);
      } else if (published < this.batchSize && !this.stopped) {
        // Wait for a nudge or the poll interval; a nudge that came during the cycle counts too.
        if (!this.nudged) await this.sleep(this.pollMs, true);
        // Under load nudges come with every commit: fold those of the next few ms into one cycle.
        const rest = began + this.minCycleMs - Date.now();
        if (rest > 0 && !this.stopped) await this.sleep(rest, false);
      }
    }
  }

  private async sleep(ms: number, wakeOnNudge: boolean): Promise<void> {
    if (ms <= 0) return;
    await new Promise<void>((resolve) => {
      // stop() wakes every sleep; a nudge only the wait for rows.
      this.wake = wakeOnNudge ? resolve : () => this.stopped && resolve();
      this.timer = setTimeout(resolve, ms);
    });
    if (this.timer) clearTimeout(this.timer);
    this.wake = undefined;
  }

  private async resign(): Promise<void> {
    const client = this.leader;
    const onError = this.leaderOnError;
    this.leader = undefined;
    this.leaderOnError = undefined;
    // Whoever leads next starts one message at a time (the stream may be full by then).
    this.serial = true;
    if (!client) return;
    try {
      await client.query('SELECT pg_advisory_unlock_all()');
      if (onError) client.removeListener('error', onError);
      client.release();
    } catch {
      client.release(true);
    }
  }

  private async lead(): Promise<pg.PoolClient | undefined> {
    if (this.leader) return this.leader;
    const client = await this.opts.pool.connect();
    // A checked-out client has no 'error' listener (the pool's is on idle ones only): without one,
    // a connection that breaks between two cycles (a Postgres restart, a killed backend) would be
    // an unhandled 'error' event that ends the process. Its next query fails, and the cycle resigns.
    const onError = (err: Error) =>
      this.opts.logger.debug({ err: describeError(err) }, 'outbox relay connection broke');
    client.on('error', onError);
    try {
      const r = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [
        `custos.outbox.${this.opts.schema}`,
      ]);
      if (r.rows[0]?.ok) {
        // A half-open connection must not hang the relay while it holds the lock.
        await client.query("SET statement_timeout = '30s'");
        this.leader = client;
        this.leaderOnError = onError;
        return client;
      }
      client.removeListener('error', onError);
      client.release();
      return undefined;
    } catch (err) {
      client.release(true);
      throw err;
    }
  }

  /** Publishes up to one batch; returns how many rows were marked published. */
  async publishBatch(): Promise<number> {
    return (await this.cycle()).published;
  }

  /**
   * One cycle: publishes up to one batch; returns how many rows were marked published and whether
   * a publish of this cycle failed (the loop backs off only then).
   */
  private async cycle(): Promise<{ published: number; failed: boolean }> {
    const nats = await this.opts.link.ready().catch(() => undefined);
    if (!nats) return { published: 0, failed: false };
    const client = await this.lead();
    if (!client) {
      // Another replica leads: a failure of our own earlier leadership is its business now.
      // Dropped without a log (no "works again": we do not know), and one at a time when we lead again.
      this.failing = undefined;
      this.serial = true;
      return { published: 0, failed: false };
    }
    const { rows } = await client.query<OutboxRow>({ ...this.select, values: [this.batchSize] });
    if (rows.length === 0) {
      // The refused rows are gone (deleted by hand): nothing fails any more.
      this.endFailure();
      return { published: 0, failed: false };
    }
    const messages = this.messagesOf(rows);
    const rowAcked = new Array<boolean>(rows.length).fill(false);
    const errors: unknown[] = [];
    const publish = (m: OutgoingMessage) =>
      nats.js.publish(m.subject, m.body, { msgID: m.id, ...(m.headers ? { headers: m.headers } : {}) });
    const bytes = messages.reduce((n, m) => n + messageBytes(m), 0);
    if (this.serial || !(await this.roomFor(nats.jsm, bytes))) {
      // One at a time, in order, up to the first failure: nothing after it reaches the stream.
      for (const m of messages) {
        try {
          this.streamName = (await publish(m)).stream;
        } catch (err) {
          errors.push(err);
          break;
        }
        for (const at of m.rows) rowAcked[at] = true;
      }
    } else {
      // Pipelined (batched events several to a message); JetStream stores them in this order.
      const results = await Promise.allSettled(messages.map(publish));
      results.forEach((r, i) => {
        if (r.status === 'fulfilled') {
          this.streamName = r.value.stream;
          for (const at of messages[i]!.rows) rowAcked[at] = true;
        } else errors.push(r.reason);
      });
    }
    if (this.room) this.room.left -= bytes;
    // Mark the longest prefix of rows whose message was acknowledged, so order is kept.
    let acked = 0;
    while (acked < rows.length && rowAcked[acked]) acked++;
    const failed = errors.length > 0;
    if (failed) this.publishFailed(errors, rows.length - acked);
    else this.publishSucceeded();
    if (acked === 0) return { published: 0, failed };
    await client.query({ ...this.mark, values: [rows.slice(0, acked).map((r) => r.id)] });
    return { published: acked, failed };
  }

  /**
   * Whether `bytes` more can be pipelined: the stream has no byte limit (or discards old messages),
   * or its room, read at most every `roomReadMs`, exceeds them by the margin. False when unknown;
   * a failed read counts as no room until the next read is due (so a failing or slow stream info
   * request, up to the JetStream manager's timeout, is not waited for every cycle).
   */
  private async roomFor(jsm: JetStreamManager, bytes: number): Promise<boolean> {
    if (!this.streamName) return false;
    const now = Date.now();
    if (!this.room || now - this.room.at >= (this.opts.roomReadMs ?? 1000)) {
      const info = await jsm.streams.info(this.streamName).catch(() => undefined);
      if (!info) {
        const margin = this.opts.pipelineMarginBytes ?? 4 * 1024 * 1024;
        this.room = { left: 0, margin, at: Date.now() };
        return false;
      }
      const max = info.config.max_bytes;
      const limited = max > 0 && info.config.discard === DiscardPolicy.New;
      this.room = {
        left: limited ? max - info.state.bytes : Infinity,
        margin: this.opts.pipelineMarginBytes ?? Math.max(4 * 1024 * 1024, 0.02 * max),
        at: now,
      };
    }
    return this.room.left - bytes >= this.room.margin;
  }

  /** A cycle had refused publishes: one at a time from now on, counted, logged when it begins or changes. */
  private publishFailed(errors: readonly unknown[], pending: number): void {
    this.serial = true;
    const reasons = errors.map(publishFailureReason);
    const metrics = relayMetricsOf(this.opts.link);
    for (const reason of reasons) metrics?.publishFailed(reason);
    const reason = reasons[0]!;
    const first = this.failing === undefined;
    if (first || this.failing!.reason !== reason) {
      this.opts.logger.warn(
        { err: describeError(errors[0]), reason, pending },
        first
          ? 'publishing outbox events failed; retrying with backoff (logged again when it ends)'
          : 'publishing outbox events still fails, for another reason',
      );
    }
    this.failing = {
      since: this.failing?.since ?? Date.now(),
      reason,
      refused: (this.failing?.refused ?? 0) + errors.length,
    };
  }

  /** A cycle published its whole batch: back to pipelining, and the end of a failure is logged. */
  private publishSucceeded(): void {
    this.serial = false;
    this.endFailure();
  }

  private endFailure(): void {
    if (!this.failing) return;
    this.opts.logger.info(
      { failed_for_ms: Date.now() - this.failing.since, refused: this.failing.refused },
      'publishing outbox events works again',
    );
    this.failing = undefined;
  }

  /**
   * The messages that carry `rows`, in row order per subject: a row of a batched event joins the
   * open batch of its subject (a new one once that would pass maxMessageBytes); any other row, and
   * a batch that ends up with one row, is a plain envelope with the row id as its message id.
   */
  private messagesOf(rows: readonly OutboxRow[]): OutgoingMessage[] {
    // A batch takes its slot when it opens, so it goes out in the place of its first row.
    const out: Array<OutgoingMessage | undefined> = [];
    const open = new Map<string, { at: number; rows: number[]; texts: string[]; bytes: number }>();
    const close = (subject: string) => {
      const g = open.get(subject);
      if (!g) return;
      open.delete(subject);
      out[g.at] = this.batchMessage(subject, g.rows, g.texts, rows);
    };
    rows.forEach((row, i) => {
      const subject = subjectFor(this.opts.subjectPrefix, row.name, this.opts.producer);
      const text = envelopeJson(row);
      if (!this.batched.has(row.name)) {
        out.push(plainMessage(subject, row, text, i));
        return;
      }
      // The event and its entry in the envelope's traceparents (a quoted string or null, a comma).
      const bytes =
        Buffer.byteLength(text) + 1 + (row.traceparent ? Buffer.byteLength(row.traceparent) + 3 : 5);
      let g = open.get(subject);
      if (g && g.bytes + bytes > this.maxMessageBytes) {
        close(subject);
        g = undefined;
      }
      if (!g) {
        g = { at: out.length, rows: [], texts: [], bytes: 64 };
        out.push(undefined);
        open.set(subject, g);
      }
      g.rows.push(i);
      g.texts.push(text);
      g.bytes += bytes;
    });
    for (const subject of [...open.keys()]) close(subject);
    return out as OutgoingMessage[];
  }

  private batchMessage(
    subject: string,
    at: number[],
    texts: string[],
    rows: readonly OutboxRow[],
  ): OutgoingMessage {
    if (at.length === 1) return plainMessage(subject, rows[at[0]!]!, texts[0]!, at[0]!);
    const traceparents = at.map((i) => rows[i]!.traceparent);
    const body =
      `{"events":[${texts.join(',')}]` +
      (traceparents.some((t) => t) ? `,"traceparents":${JSON.stringify(traceparents)}}` : '}');
    return { subject, body, id: batchMessageId(at.map((i) => rows[i]!.id)), rows: at };
  }
}

/** One JetStream message of a relay cycle, with the indexes of the rows it carries. */
interface OutgoingMessage {
  subject: string;
  body: string;
  id: string;
  /** The plain envelope's trace context; a batch carries its events' in its body. */
  headers?: ReturnType<typeof headers>;
  rows: number[];
}

/** About what JetStream stores for `m` (payload, subject, headers and its own overhead). */
function messageBytes(m: OutgoingMessage): number {
  return Buffer.byteLength(m.body) + m.subject.length + 200;
}

function plainMessage(subject: string, row: OutboxRow, text: string, at: number): OutgoingMessage {
  const h = headers();
  if (row.traceparent) h.set('traceparent', row.traceparent);
  return { subject, body: text, id: row.id, headers: h, rows: [at] };
}

/**
 * The EventEnvelope of a row as JSON, with the payload's JSON text (valid JSON from Postgres) put in
 * as it is: the same document as `JSON.stringify(envelope)`, without parsing the payload first.
 */
function envelopeJson(row: OutboxRow): string {
  const head: Omit<EventEnvelope, 'data'> = {
    id: row.id,
    type: row.name as EventName,
    created_at: row.created_at.toISOString(),
    org_id: row.org_id,
  };
  const text = JSON.stringify(head);
  return `${text.slice(0, -1)},"data":${row.payload}}`;
}
