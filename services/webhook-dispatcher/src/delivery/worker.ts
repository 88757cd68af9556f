import { describeError, type Logger } from '@custos/service-kit';
import { afterFailure, openSecret, retryDelayMs, signBody } from '../webhooks/webhook-fns.js';
import type { ClaimedDelivery, WebhookStore } from '../webhooks/webhook-store.js';
import { DestinationRefusedError, type DestinationPolicy, resolveDestination } from './destination.js';
import { type SendResult, postPinned } from './sender.js';

/** Settings of the delivery worker. */
export interface WorkerOptions {
  store: WebhookStore;
  policy: DestinationPolicy;
  secretKey: Buffer;
  logger: Logger;
  /** Pause between looks for due deliveries when the last one found none to spare. */
  intervalMs: number;
  /** Wait before the first retry; retry n waits base × 4^(n-1) ±20 %. */
  retryBaseMs: number;
  /** Time a receiver has to answer. */
  timeoutMs: number;
  /** Deliveries in flight at once in this replica. */
  concurrency: number;
  /** Deliveries of one org in flight at once, across replicas. */
  orgConcurrency: number;
  /** Finished deliveries older than this are deleted. */
  retentionMs: number;
  /** Counts attempts by result, for metrics. */
  onAttempt?: (result: 'succeeded' | 'failed' | 'refused') => void;
}

const PURGE_EVERY_MS = 60 * 60 * 1000;
const PURGE_SLICE = 1000;

/** `p`, or `onTimeout()` thrown after `ms` (the work behind `p` is not cancelled). */
async function withTimeout<T>(p: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(onTimeout()), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Sends due deliveries (SPEC.md §6.2). It keeps up to `concurrency` attempts in flight: every
 * `intervalMs`, and whenever an attempt ends, it claims due deliveries under a lease for the free
 * lanes, posts each one signed to the address its URL resolves to — checked again at every attempt
 * — and records the attempt with the delivery's next state in one transaction. A worker killed
 * mid-send loses nothing: its leases run out and the deliveries are claimed again.
 */
export class DeliveryWorker {
  private stopped = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private lastPurge = 0;

  constructor(private readonly opts: WorkerOptions) {}

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops claiming; attempts in flight finish and are recorded first. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    const inFlight = new Set<Promise<void>>();
    while (!this.stopped) {
      let more = false;
      const free = this.opts.concurrency - inFlight.size;
      if (free > 0) {
        try {
          const claimed = await this.claim(free);
          for (const d of claimed) {
            const p: Promise<void> = this.attempt(d).finally(() => {
              inFlight.delete(p);
              this.wake?.();
            });
            inFlight.add(p);
          }
          more = claimed.length === free;
          await this.purge();
        } catch (err) {
          this.opts.logger.warn({ err: describeError(err) }, 'webhook worker cycle failed; retrying');
        }
      }
      // Sleep until the interval passes or a lane frees up (then claim for it at once).
      if (!this.stopped && (!more || inFlight.size >= this.opts.concurrency)) {
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, this.opts.intervalMs);
          this.wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
        this.wake = undefined;
      }
    }
    await Promise.all(inFlight);
  }

  /**
   * Claims up to `n` due deliveries under a lease that covers one attempt (the DNS lookup and the
   * request, each bounded by the timeout, and the record) with room to spare; a dead worker's
   * claims come back when it ends. One org holds at most `orgConcurrency` leases, so an org whose
   * receivers hang cannot hold up the others.
   */
  private claim(n: number): Promise<ClaimedDelivery[]> {
    const leaseMs = 2 * this.opts.timeoutMs + 10000;
    return this.opts.store.claimDue(n, leaseMs, this.opts.orgConcurrency);
  }

  private async attempt(d: ClaimedDelivery): Promise<void> {
    const n = d.attemptCount + 1;
    const attemptedAt = new Date();
    let result: SendResult;
    let refused = false;
    try {
      const dest = await withTimeout(
        resolveDestination(d.url, this.opts.policy),
        this.opts.timeoutMs,
        () => new DestinationRefusedError(`dns lookup took longer than ${this.opts.timeoutMs} ms`),
      );
      const secret = openSecret(this.opts.secretKey, d.webhookId, d.secretSealed);
      result = await postPinned(
        dest,
        d.body,
        {
          'X-Webhook-Signature': signBody(secret, d.body),
          'X-Webhook-Id': d.eventId,
          'X-Webhook-Event': d.eventType,
          'X-Webhook-Timestamp': String(Math.floor(attemptedAt.getTime() / 1000)),
        },
        this.opts.timeoutMs,
      );
    } catch (err) {
      refused = err instanceof DestinationRefusedError;
      if (!refused)
        this.opts.logger.error({ err: describeError(err), delivery_id: d.id }, 'webhook attempt failed');
      result = {
        ok: false,
        statusCode: null,
        durationMs: Date.now() - attemptedAt.getTime(),
        error: refused ? `refused: ${(err as DestinationRefusedError).reason}` : 'internal error',
      };
    }
    const next = result.ok ? 'succeeded' : afterFailure(n);
    const error = result.ok
      ? ''
      : (result.error ?? (result.statusCode !== null ? `HTTP ${result.statusCode}` : 'failed'));
    try {
      const recorded = await this.opts.store.recordAttempt(d.id, n, {
        statusCode: result.statusCode,
        durationMs: Math.max(0, Math.round(result.durationMs)),
        error: error.slice(0, 500),
        attemptedAt,
        status: next === 'retry' ? 'pending' : next,
        nextAttemptAt:
          next === 'retry'
            ? new Date(Date.now() + retryDelayMs(n, this.opts.retryBaseMs, Math.random()))
            : null,
      });
      if (!recorded)
        this.opts.logger.warn({ delivery_id: d.id, attempt: n }, 'attempt already recorded elsewhere');
    } catch (err) {
      // The lease runs out and the delivery is tried again; the receiver may see it twice.
      this.opts.logger.error(
        { err: describeError(err), delivery_id: d.id },
        'could not record webhook attempt',
      );
    }
    this.opts.onAttempt?.(result.ok ? 'succeeded' : refused ? 'refused' : 'failed');
    this.opts.logger.info(
      {
        delivery_id: d.id,
        webhook_id: d.webhookId,
        event_type: d.eventType,
        attempt: n,
        status_code: result.statusCode,
        outcome: next,
        ...(result.ok ? {} : { error }),
      },
      'webhook attempt',
    );
  }

  private async purge(): Promise<void> {
    if (Date.now() - this.lastPurge < PURGE_EVERY_MS) return;
    this.lastPurge = Date.now();
    const before = new Date(Date.now() - this.opts.retentionMs);
    let deleted = 0;
    // In slices, so no single statement holds locks for long; until nothing old is left.
    for (let n = PURGE_SLICE; n === PURGE_SLICE && !this.stopped; deleted += n) {
      n = await this.opts.store.purgeFinished(before, PURGE_SLICE);
    }
    if (deleted > 0) this.opts.logger.info({ deleted }, 'purged finished webhook deliveries');
  }
}
