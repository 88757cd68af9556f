import { randomUUID } from 'node:crypto';
import { UnavailableError, injectTraceContext } from '@custos/service-kit';
import type pg from 'pg';
import { type AuditRecordInput, auditRecordData } from './audit.js';
import type { EventName } from './catalogue.js';
import { MAX_EVENT_DATA_BYTES } from './outbox.js';

/** Options of an OutboxGroupCommit. */
export interface OutboxGroupCommitOptions {
  pool: pg.Pool;
  /** The Postgres schema that holds the service's `outbox` table. */
  schema: string;
  /** Rows in one INSERT at most. Default 256. */
  maxBatch?: number;
  /** Batches being committed at once at most (each on its own pool connection). Default 2. */
  maxInFlight?: number;
  /** Called after each committed batch (e.g. the outbox relay's `nudge`); what it throws is ignored. */
  onCommitted?: () => void;
  /**
   * Rows waiting at most (default 10,000). When Postgres is this far behind, a new row is refused
   * at once (its action answers 503) rather than queued with its caller's state held in memory.
   */
  maxQueue?: number;
}

// `\u0000` as JSON.stringify writes a NUL character: after an even run of backslashes (an odd
// run makes it the text `\u0000`, which jsonb takes).
const NUL_ESCAPE = /(?:^|[^\\])(?:\\\\)*\\u0000/;

/** One outbox row, ready to insert: what writeEvent stores, for hand-written SQL. */
export interface OutboxRow {
  id: string;
  name: string;
  orgId: string | null;
  /** The event's `data`, as JSON text (for a `jsonb` parameter). */
  payload: string;
  traceparent: string | null;
}

/**
 * The outbox row of an event (a fresh id, the current trace context). Refuses data NATS could not
 * carry (over MAX_EVENT_DATA_BYTES), as writeEvent does.
 */
export function outboxRowOf(event: {
  name: EventName;
  orgId: string | null;
  data: Record<string, unknown>;
}): OutboxRow {
  const payload = JSON.stringify(event.data);
  // Postgres' jsonb refuses the NUL character: such a row would fail the statement it is in, and
  // with it every other caller of a group commit. Refused here, alone.
  if (NUL_ESCAPE.test(payload)) throw new Error(`event ${event.name} data holds a NUL character`);
  const size = Buffer.byteLength(payload);
  if (size > MAX_EVENT_DATA_BYTES) {
    throw new Error(`event ${event.name} data is ${size} bytes; at most ${MAX_EVENT_DATA_BYTES}`);
  }
  const carrier: Record<string, string> = {};
  injectTraceContext(carrier);
  return {
    id: randomUUID(),
    name: event.name,
    orgId: event.orgId,
    payload,
    traceparent: carrier['traceparent'] ?? null,
  };
}

/** The outbox row of an audit record (an `audit.recorded` event); refuses secret-bearing metadata. */
export function auditOutboxRowOf(record: AuditRecordInput): OutboxRow {
  return outboxRowOf({
    name: 'audit.recorded',
    orgId: record.orgId,
    data: auditRecordData(record) as unknown as Record<string, unknown>,
  });
}

interface PendingRow extends OutboxRow {
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit of outbox rows (ARCHITECTURE §1: "commit concurrent audit records in groups — never
 * by giving up fail-closed audit"). An action whose only write is its event or audit record hands
 * the row here and waits: rows that arrive while a batch is being committed go together in the next
 * INSERT (one statement, so one transaction and one WAL flush for all of them). A caller's promise
 * resolves only once its row is committed, and rejects when that INSERT fails: nobody goes on as if
 * a record were written that was not. When idle, a row is written at once (no added wait).
 */
export class OutboxGroupCommit {
  private readonly queue: PendingRow[] = [];
  private inFlight = 0;
  private scheduled = false;
  private readonly maxBatch: number;
  private readonly maxInFlight: number;
  private readonly maxQueue: number;
  private readonly statement: string;
  private readonly statementName: string;

  constructor(private readonly opts: OutboxGroupCommitOptions) {
    this.maxBatch = opts.maxBatch ?? 256;
    this.maxInFlight = opts.maxInFlight ?? 2;
    this.maxQueue = opts.maxQueue ?? 10_000;
    const schema = `"${opts.schema.replace(/"/g, '""')}"`;
    this.statement =
      `INSERT INTO ${schema}.outbox (id, name, org_id, payload, traceparent) ` +
      `SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[], $5::text[])`;
    this.statementName = `custos_outbox_group_${opts.schema}`;
  }

  /** Commits an audit record (an `audit.recorded` event); resolves with its event id once committed. */
  audit(record: AuditRecordInput): Promise<string> {
    return this.row(() => auditOutboxRowOf(record));
  }

  /** Commits one event row; resolves with its id once committed. */
  event(event: { name: EventName; orgId: string | null; data: Record<string, unknown> }): Promise<string> {
    return this.row(() => outboxRowOf(event));
  }

  // A row that cannot be built (too large, a secret-bearing key) is refused alone, before any batch.
  private row(build: () => OutboxRow): Promise<string> {
    let row: OutboxRow;
    try {
      row = build();
    } catch (err) {
      return Promise.reject(err);
    }
    if (this.queue.length >= this.maxQueue) {
      // Postgres is that far behind: refuse at once (503), whatever the caller does with errors.
      return Promise.reject(
        new UnavailableError(`the outbox group commit has ${this.queue.length} rows waiting; retry shortly`),
      );
    }
    return new Promise<string>((resolve, reject) => {
      this.queue.push({ ...row, resolve: () => resolve(row.id), reject });
      this.schedule();
    });
  }

  // Rows queued in the same turn of the event loop go together; a full pipeline waits for a slot.
  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.maxInFlight) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.inFlight++;
      void this.commit(batch).finally(() => {
        this.inFlight--;
        if (this.queue.length > 0) this.schedule();
      });
    }
  }

  private async commit(batch: PendingRow[]): Promise<void> {
    try {
      await this.opts.pool.query({
        name: this.statementName,
        text: this.statement,
        values: [
          batch.map((r) => r.id),
          batch.map((r) => r.name),
          batch.map((r) => r.orgId),
          batch.map((r) => r.payload),
          batch.map((r) => r.traceparent),
        ],
      });
    } catch (err) {
      for (const r of batch) r.reject(err);
      return;
    }
    for (const r of batch) r.resolve();
    try {
      this.opts.onCommitted?.();
    } catch {
      // A nudge that fails changes nothing that was committed.
    }
  }
}
