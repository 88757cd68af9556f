import { describeError, type Logger } from '@custos/service-kit';
import { headers } from '@nats-io/nats-core';
import type pg from 'pg';
import { subjectFor, type EventEnvelope, type EventName } from './catalogue.js';
import type { NatsLink } from './nats.js';

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
}

interface OutboxRow {
  seq: string;
  id: string;
  name: string;
  org_id: string | null;
  payload: Record<string, unknown>;
  traceparent: string | null;
  created_at: Date;
}

/**
 * Publishes outbox rows to JetStream in insertion order (`seq`), using the row id as the message id so that
 * JetStream drops a republished row; marks them published afterwards. Only one relay per schema is
 * active at a time (a session advisory lock), so replicas do not race. NATS or Postgres outages only
 * delay publication: rows stay until they are acknowledged.
 */
export class OutboxRelay {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private leader: pg.PoolClient | undefined;
  private wake: (() => void) | undefined;
  private readonly batchSize: number;
  private readonly pollMs: number;

  constructor(private readonly opts: RelayOptions) {
    this.batchSize = opts.batchSize ?? 200;
    this.pollMs = opts.pollMs ?? 250;
  }

  /** Starts the publish loop. */
  start(): void {
    this.running ??= this.loop();
  }

  /** Asks the loop to look for rows now (call after committing an outbox write). */
  nudge(): void {
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

  private async loop(): Promise<void> {
    while (!this.stopped) {
      let published = 0;
      try {
        published = await this.publishBatch();
      } catch (err) {
        this.opts.logger.warn({ err: describeError(err) }, 'outbox relay cycle failed; will retry');
        await this.resign();
      }
      if (published < this.batchSize && !this.stopped) {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          this.timer = setTimeout(resolve, this.pollMs);
        });
        this.wake = undefined;
      }
    }
  }

  private async resign(): Promise<void> {
    const client = this.leader;
    this.leader = undefined;
    if (!client) return;
    try {
      await client.query('SELECT pg_advisory_unlock_all()');
      client.release();
    } catch {
      client.release(true);
    }
  }

  private async lead(): Promise<pg.PoolClient | undefined> {
    if (this.leader) return this.leader;
    const client = await this.opts.pool.connect();
    try {
      const r = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [
        `custos.outbox.${this.opts.schema}`,
      ]);
      if (r.rows[0]?.ok) {
        // A half-open connection must not hang the relay while it holds the lock.
        await client.query("SET statement_timeout = '30s'");
        this.leader = client;
        return client;
      }
      client.release();
      return undefined;
    } catch (err) {
      client.release(true);
      throw err;
    }
  }

  /** Publishes up to one batch; returns how many rows were marked published. */
  async publishBatch(): Promise<number> {
    const nats = await this.opts.link.ready().catch(() => undefined);
    if (!nats) return 0;
    const client = await this.lead();
    if (!client) return 0;
    const schema = `"${this.opts.schema.replace(/"/g, '""')}"`;
    const { rows } = await client.query<OutboxRow>(
      `SELECT seq, id, name, org_id, payload, traceparent, created_at FROM ${schema}.outbox
       WHERE published_at IS NULL ORDER BY seq LIMIT $1`,
      [this.batchSize],
    );
    if (rows.length === 0) return 0;
    // Publish the batch pipelined, then mark the longest acknowledged prefix so order is kept.
    const results = await Promise.allSettled(
      rows.map((row) => {
        const envelope: EventEnvelope = {
          id: row.id,
          type: row.name as EventName,
          created_at: row.created_at.toISOString(),
          org_id: row.org_id,
          data: row.payload,
        };
        const h = headers();
        if (row.traceparent) h.set('traceparent', row.traceparent);
        const subject = subjectFor(this.opts.subjectPrefix, row.name, this.opts.producer);
        return nats.js.publish(subject, JSON.stringify(envelope), { msgID: row.id, headers: h });
      }),
    );
    let acked = 0;
    while (acked < results.length && results[acked]?.status === 'fulfilled') acked++;
    if (acked < results.length) {
      const failure = results[acked];
      this.opts.logger.warn(
        {
          err: failure?.status === 'rejected' ? describeError(failure.reason) : undefined,
          pending: rows.length - acked,
        },
        'publishing outbox rows failed; will retry',
      );
    }
    if (acked === 0) return 0;
    await client.query(`UPDATE ${schema}.outbox SET published_at = now() WHERE id = ANY($1::uuid[])`, [
      rows.slice(0, acked).map((r) => r.id),
    ]);
    return acked;
  }
}
