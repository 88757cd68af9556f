import { connectServiceIdentityKeys } from '@custos/auth';
import {
  FANOUT_CONSUMERS,
  IdempotentConsumer,
  LEGACY_FANOUT_DURABLE,
  consumerFilter,
  runDataService,
  startServiceEventMetrics,
} from '@custos/events';
import { WebhookDispatcherServiceService } from '@custos/proto/custos/webhook_dispatcher/v1/service';
import { parseNetwork } from '@custos/service-kit';
import { Counter } from 'prom-client';
import { configShape } from './config.js';
import { SCHEMA, inbox } from './db/schema.js';
import { type DestinationPolicy, createResolver, resolveDestination } from './delivery/destination.js';
import { DeliveryWorker } from './delivery/worker.js';
import { acceptsEvent, subscribableEventConsumer } from './events/subscribable-event-consumer.js';
import { webhookAccess, webhookGrpc } from './grpc/webhook-grpc.js';
import { WebhookService } from './webhooks/webhook-service.js';
import { WebhookStore } from './webhooks/webhook-store.js';

// Composition root of webhook-dispatcher: the webhook API, the consumer that turns subscribable
// events into deliveries, and the worker that sends them.
runDataService({
  name: 'webhook-dispatcher',
  schema: SCHEMA,
  configShape,
  async start(rt, { db, events, pool }) {
    // Outbox backlog and consumer lag (custos_outbox_*, custos_nats_consumer_*) on /metrics.
    startServiceEventMetrics(rt, { pool, schema: SCHEMA, events });
    const c = rt.config;
    const keys = await connectServiceIdentityKeys(rt);
    const policy: DestinationPolicy = {
      allowHttp: c.WEBHOOK_ALLOW_HTTP,
      allowedNetworks: c.WEBHOOK_ALLOWED_CIDRS.map((cidr) => parseNetwork(cidr)!),
      resolve: createResolver(c.WEBHOOK_DNS_SERVERS),
    };
    const store = new WebhookStore(db);
    const webhooks = new WebhookService({
      store,
      secretKey: c.WEBHOOK_SECRET_KEY,
      checkDestination: async (url) => (await resolveDestination(url, policy)).url.href,
    });

    const fanOut = subscribableEventConsumer({ store });
    // One consumer per family of subscribable events (NATS 2.9 takes one filter per consumer): this
    // service never receives the internal events (audit records, share mail requests).
    const consumers = FANOUT_CONSUMERS.map(
      (c) =>
        new IdempotentConsumer({
          link: events.link,
          stream: events.stream,
          durable: c.durable,
          filterSubject: consumerFilter(events.subjectPrefix, c.filter),
          startAfter: LEGACY_FANOUT_DURABLE,
          accept: acceptsEvent,
          db,
          inbox,
          logger: rt.logger,
          handler: async (event, tx) => {
            await fanOut(event, tx);
          },
        }),
    );
    for (const consumer of consumers) consumer.start();
    rt.onShutdown('webhook-consumers', async () => {
      await Promise.all(consumers.map((consumer) => consumer.stop()));
    });

    const attempts = new Counter({
      name: 'custos_webhook_attempts_total',
      help: 'Webhook delivery attempts by result (succeeded, failed, refused by the destination rules).',
      labelNames: ['result'],
      registers: [rt.metrics.registry],
    });
    // Every result exported from the start, so rates over them exist before the first attempt.
    for (const result of ['succeeded', 'failed', 'refused'] as const) attempts.inc({ result }, 0);
    const worker = new DeliveryWorker({
      store,
      policy,
      secretKey: c.WEBHOOK_SECRET_KEY,
      logger: rt.logger,
      intervalMs: c.WEBHOOK_WORKER_INTERVAL_MS,
      retryBaseMs: c.WEBHOOK_RETRY_BASE_MS,
      timeoutMs: c.WEBHOOK_TIMEOUT_MS,
      concurrency: c.WEBHOOK_CONCURRENCY,
      orgConcurrency: c.WEBHOOK_ORG_CONCURRENCY,
      retentionMs: c.WEBHOOK_RETENTION_DAYS * 86_400_000,
      onAttempt: (result) => attempts.inc({ result }),
    });
    worker.start();
    rt.onShutdown('webhook-worker', () => worker.stop());

    rt.grpc.add(WebhookDispatcherServiceService, webhookGrpc({ keys, webhooks }), webhookAccess);
  },
});
