import { describeError, type Logger } from '@custos/service-kit';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type pg from 'pg';
import type { NatsLink } from './nats.js';
import { PUBLISH_FAILURE_REASONS, type PublishFailureReason } from './outbox-publish-failure.js';

/** The consumers of one link that run in this process (IdempotentConsumer adds and removes itself). */
const consumersOn = new WeakMap<NatsLink, Map<string, { stream: string; durable: string }>>();
/** The metrics of consumers on a link, once startEventMetrics has made them. */
const metricsOn = new WeakMap<NatsLink, ConsumerMetrics>();

/** Records that a consumer with this durable runs on `link` (its lag is polled while it does). */
export function trackConsumer(link: NatsLink, stream: string, durable: string): void {
  let m = consumersOn.get(link);
  if (!m) consumersOn.set(link, (m = new Map()));
  m.set(`${stream}/${durable}`, { stream, durable });
  // Its counters exist from now on (an alert on them has data before the first event).
  metricsOn.get(link)?.track(durable);
}

/**
 * Why a consumer dropped an event for good (terminated, never redelivered):
 * - `malformed`: not JSON, not an event envelope, an id that is not a uuid, a malformed batch;
 * - `type_mismatch`: the event's type is not the one its subject names;
 * - `id_mismatch`: the event's id (a batch's: the batch id of its ids) is not its message id.
 */
export type DropReason = 'malformed' | 'type_mismatch' | 'id_mismatch';

/** Every DropReason, for exporting each as zero from the start. */
export const DROP_REASONS: readonly DropReason[] = ['malformed', 'type_mismatch', 'id_mismatch'];

/** The consumer stopped: its lag is no longer polled. */
export function untrackConsumer(link: NatsLink, stream: string, durable: string): void {
  consumersOn.get(link)?.delete(`${stream}/${durable}`);
}

/** What a consumer reports about the events it applies (labelled by its durable name). */
export interface ConsumerMetrics {
  /** Events applied (committed), each with how long after its creation it was applied. */
  applied(durable: string, createdAt: readonly (string | undefined)[], now?: number): void;
  /** A handler failure: the event goes back for redelivery. */
  failed(durable: string, events: number): void;
  /** Events dropped for good (terminated): lost to this consumer. */
  dropped(durable: string, reason: DropReason, events: number): void;
  /** The consumer started: its series are exported (zero) at once. */
  track(durable: string): void;
}

/** The consumer metrics of `link`, or undefined while startEventMetrics has not run for it. */
export function consumerMetricsOf(link: NatsLink): ConsumerMetrics | undefined {
  return metricsOn.get(link);
}

/** What an outbox relay reports about its publishes. */
export interface RelayMetrics {
  /** A message the stream refused or did not acknowledge. */
  publishFailed(reason: PublishFailureReason): void;
}

const relayMetricsOn = new WeakMap<NatsLink, RelayMetrics>();

/** The relay metrics of `link`, or undefined while startEventMetrics has not run for it. */
export function relayMetricsOf(link: NatsLink): RelayMetrics | undefined {
  return relayMetricsOn.get(link);
}

/** Buckets of the event delay histogram: milliseconds when all is well, up to an hour behind. */
const DELAY_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];

/** Options of startEventMetrics. */
export interface EventMetricsOptions {
  registry: Registry;
  logger: Logger;
  /** The service's pool: the outbox backlog is read on it. */
  pool: pg.Pool;
  /** The schema of the service's `outbox` table. */
  schema: string;
  link: NatsLink;
  /** How often the consumers' lag is read from JetStream, in ms. Default 15 s. */
  lagPollMs?: number;
  /** How long an outbox backlog reading is reused by later scrapes, in ms. Default 5 s. */
  outboxCacheMs?: number;
  /** How long one outbox backlog query may take before the previous reading is kept, in ms. Default 2 s. */
  outboxTimeoutMs?: number;
}

/** The running event metrics of one registry; stop() ends the lag poller. */
export interface EventMetrics {
  /** Reads every tracked consumer's lag from JetStream now (the poller does it on its own). */
  pollLag(): Promise<void>;
  stop(): Promise<void>;
}

const running = new WeakMap<Registry, EventMetrics>();

/**
 * Exports the event plumbing's health on `registry`: the outbox backlog (rows not yet relayed and
 * the age of the oldest, read when scraped, reused for `outboxCacheMs`), each consumer's JetStream
 * lag (pending, awaiting acknowledgement, redelivered; polled every `lagPollMs`; removed and
 * counted as an info failure when a poll cannot read them), and per consumer
 * the events applied, the handler failures and the delay from an event's creation (its outbox
 * commit) to its application (its inbox commit). Once per registry: a second call returns the first.
 */
export function startEventMetrics(opts: EventMetricsOptions): EventMetrics {
  const existing = running.get(opts.registry);
  if (existing) return existing;
  const { registry, link } = opts;
  registerOutboxBacklog(opts);
  const publishFailures = new Counter({
    name: 'custos_outbox_publish_failures_total',
    help: 'Outbox messages the relay could not publish (refused by a full stream, no responders, timeout, other); each is retried after a backoff.',
    labelNames: ['reason'],
    registers: [registry],
  });
  for (const reason of PUBLISH_FAILURE_REASONS) publishFailures.inc({ reason }, 0);
  relayMetricsOn.set(link, { publishFailed: (reason) => publishFailures.inc({ reason }) });

  const consumerGauge = (name: string, help: string) =>
    new Gauge({ name, help, labelNames: ['consumer'], registers: [registry] });
  const pending = consumerGauge(
    'custos_nats_consumer_pending_messages',
    'Messages of the stream matching the consumer’s filter not yet delivered to it (JetStream num_pending).',
  );
  const ackPending = consumerGauge(
    'custos_nats_consumer_ack_pending_messages',
    'Messages delivered to the consumer and not yet acknowledged (JetStream num_ack_pending).',
  );
  const redelivered = consumerGauge(
    'custos_nats_consumer_redelivered_messages',
    'Messages delivered more than once and not yet acknowledged (JetStream num_redelivered).',
  );
  const infoFailures = new Counter({
    name: 'custos_nats_consumer_info_failures_total',
    help: 'Lag polls that could not read the consumer’s JetStream info (NATS down, no stream leader, consumer missing); the lag gauges of that consumer are removed until a poll reads it again.',
    labelNames: ['consumer'],
    registers: [registry],
  });
  const applied = new Counter({
    name: 'custos_event_consumer_applied_total',
    help: 'Events a consumer applied (its inbox transaction committed); repeats of applied events are not counted.',
    labelNames: ['consumer'],
    registers: [registry],
  });
  const failures = new Counter({
    name: 'custos_event_consumer_failures_total',
    help: 'Events whose handler failed; each is redelivered.',
    labelNames: ['consumer'],
    registers: [registry],
  });
  const delay = new Histogram({
    name: 'custos_event_consumer_delay_seconds',
    help: 'Time from an event’s creation (its outbox commit) to its application by the consumer (inbox commit).',
    labelNames: ['consumer'],
    buckets: DELAY_BUCKETS,
    registers: [registry],
  });
  const dropped = new Counter({
    name: 'custos_event_consumer_dropped_total',
    help: 'Events a consumer dropped for good (terminated, never redelivered) by reason: malformed, type_mismatch (type not the one its subject names), id_mismatch (id not its message id). For audit-chain each is a lost audit record.',
    labelNames: ['consumer', 'reason'],
    registers: [registry],
  });
  // Consumers whose delay series exist (zeroed by the poller, or made by an observation: a zero then
  // would wipe it).
  const zeroed = new Set<string>();
  /** Every consumer exports its series from the start, so an alert on it has data at once. */
  const track = (durable: string) => {
    applied.inc({ consumer: durable }, 0);
    failures.inc({ consumer: durable }, 0);
    infoFailures.inc({ consumer: durable }, 0);
    for (const reason of DROP_REASONS) dropped.inc({ consumer: durable, reason }, 0);
    if (!zeroed.has(durable)) {
      zeroed.add(durable);
      delay.zero({ consumer: durable });
    }
  };
  metricsOn.set(link, {
    track,
    dropped(durable, reason, events) {
      dropped.inc({ consumer: durable, reason }, events);
    },
    applied(durable, createdAt, now = Date.now()) {
      zeroed.add(durable);
      applied.inc({ consumer: durable }, createdAt.length);
      for (const at of createdAt) {
        const t = at ? Date.parse(at) : NaN;
        if (Number.isFinite(t)) delay.observe({ consumer: durable }, Math.max(0, now - t) / 1000);
      }
    },
    failed(durable, events) {
      failures.inc({ consumer: durable }, events);
    },
  });
  for (const { durable } of consumersOn.get(link)?.values() ?? []) track(durable);

  let polling: Promise<void> | undefined;
  const pollLag = () =>
    (polling ??= (async () => {
      try {
        const nats = await link.ready().catch(() => undefined);
        const tracked = [...(consumersOn.get(link)?.values() ?? [])];
        for (const { stream, durable } of tracked) {
          track(durable);
          const info = await nats?.jsm.consumers.info(stream, durable).catch((err: unknown) => {
            opts.logger.debug({ err: describeError(err), consumer: durable }, 'consumer info not read');
            return undefined;
          });
          if (!info) {
            // No reading: the series go (a stale number would claim a lag that is no longer known)
            // and the failure is counted, so an alert can tell "unknown" from "no lag".
            infoFailures.inc({ consumer: durable });
            for (const g of [pending, ackPending, redelivered]) g.remove({ consumer: durable });
            continue;
          }
          pending.set({ consumer: durable }, info.num_pending);
          ackPending.set({ consumer: durable }, info.num_ack_pending);
          redelivered.set({ consumer: durable }, info.num_redelivered);
        }
      } finally {
        polling = undefined;
      }
    })());
  const timer = setInterval(() => void pollLag(), opts.lagPollMs ?? 15_000);
  timer.unref();
  // A first reading soon after start, when the consumers have made their durables.
  const first = setTimeout(() => void pollLag(), 1_000);
  first.unref();
  const handle: EventMetrics = {
    pollLag,
    stop: async () => {
      clearInterval(timer);
      clearTimeout(first);
      await polling;
    },
  };
  running.set(registry, handle);
  return handle;
}

/**
 * The outbox backlog gauges: read when scraped with one indexed query (the partial index on
 * unpublished rows; the count stops at 100,000), reused for `outboxCacheMs`; a query that fails or
 * outlasts `outboxTimeoutMs` (a saturated pool) leaves the last reading, so a scrape never waits long.
 */
function registerOutboxBacklog(opts: EventMetricsOptions): void {
  const schema = `"${opts.schema.replace(/"/g, '""')}"`;
  const text =
    `SELECT (SELECT count(*) FROM (SELECT 1 FROM ${schema}.outbox WHERE published_at IS NULL LIMIT 100000) p)::int AS pending,` +
    ` (SELECT extract(epoch FROM now() - created_at)::float8 FROM ${schema}.outbox` +
    '   WHERE published_at IS NULL ORDER BY seq LIMIT 1) AS age';
  let last = { pending: 0, age: 0, at: 0 };
  // One query at a time: a slow one is waited for by no scrape longer than the timeout, and no
  // other starts until it ends (scrapes of a saturated pool must not queue more checkouts).
  let inflight: Promise<void> | undefined;
  const refresh = () =>
    (inflight ??= opts.pool
      .query<{ pending: number; age: number | null }>(text)
      .then(
        (r) => {
          const row = r.rows[0];
          last = { pending: row?.pending ?? 0, age: Math.max(0, row?.age ?? 0), at: Date.now() };
        },
        (err: unknown) => opts.logger.debug({ err: describeError(err) }, 'outbox backlog not read'),
      )
      .finally(() => {
        inflight = undefined;
      }));
  const read = async () => {
    if (Date.now() - last.at < (opts.outboxCacheMs ?? 5_000)) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      refresh(),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, opts.outboxTimeoutMs ?? 2_000);
      }),
    ]);
    clearTimeout(timer);
  };
  new Gauge({
    name: 'custos_outbox_pending_events',
    help: 'Outbox rows not yet relayed to NATS (counted up to 100,000).',
    registers: [opts.registry],
    async collect() {
      await read();
      this.set(last.pending);
    },
  });
  new Gauge({
    name: 'custos_outbox_oldest_pending_age_seconds',
    help: 'Age of the oldest outbox row not yet relayed to NATS; 0 when none waits.',
    registers: [opts.registry],
    async collect() {
      await read();
      this.set(last.age);
    },
  });
}

/** The part of a service's runtime startServiceEventMetrics uses. */
export interface EventMetricsRuntime {
  metrics: { registry: Registry };
  logger: Logger;
  onShutdown(name: string, step: () => Promise<void>): void;
}

/**
 * startEventMetrics for a data service (call it in its start, with runDataService's deps): the
 * outbox backlog of `schema` and the lag of every consumer the service runs on `events.link`.
 */
export function startServiceEventMetrics(
  rt: EventMetricsRuntime,
  deps: { pool: pg.Pool; schema: string; events: { link: NatsLink } },
): EventMetrics {
  const m = startEventMetrics({
    registry: rt.metrics.registry,
    logger: rt.logger,
    pool: deps.pool,
    schema: deps.schema,
    link: deps.events.link,
  });
  rt.onShutdown('event-metrics', () => m.stop());
  return m;
}
