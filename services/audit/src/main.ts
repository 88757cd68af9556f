import { connectServiceIdentityKeys } from '@custos/auth';
import {
  IdempotentConsumer,
  NATS_SERVICE_NAMES,
  auditRecordedFilter,
  runDataService,
  startServiceEventMetrics,
} from '@custos/events';
import { AuditServiceService } from '@custos/proto/custos/audit/v1/service';
import { Counter } from 'prom-client';
import { AuditService } from './chain/audit-service.js';
import { AuditStore } from './chain/audit-store.js';
import { parseCheckpointKey } from './checkpoints/checkpoint-fns.js';
import { CheckpointService } from './checkpoints/checkpoint-service.js';
import { CheckpointStore } from './checkpoints/checkpoint-store.js';
import { configShape } from './config.js';
import { SCHEMA, inbox } from './db/schema.js';
import { AUDIT_RECORDED_DURABLE, auditRecordedBatchConsumer } from './events/audit-recorded-consumer.js';
import { auditAccess, auditGrpc } from './grpc/audit-grpc.js';

// Composition root of audit: the chain, the consumer of `audit.recorded`, then the gRPC adapter.
runDataService({
  name: 'audit',
  schema: SCHEMA,
  configShape,
  async start(rt, { pool, db, events }) {
    // Outbox backlog and consumer lag (custos_outbox_*, custos_nats_consumer_*) on /metrics.
    startServiceEventMetrics(rt, { pool, schema: SCHEMA, events });
    const c = rt.config;
    const keys = await connectServiceIdentityKeys(rt);
    const chain = new AuditStore(db, c.AUDIT_HMAC_KEY);
    const audit = new AuditService(chain, c.AUDIT_HMAC_KEY, rt.logger);
    const checkpointKey = c.AUDIT_CHECKPOINT_SIGNING_KEY
      ? parseCheckpointKey(c.AUDIT_CHECKPOINT_SIGNING_KEY)
      : undefined;
    if (!checkpointKey)
      rt.logger.warn('AUDIT_CHECKPOINT_SIGNING_KEY is unset: audit chain heads are not checkpointed');
    const checkpoints = new CheckpointService(new CheckpointStore(db), chain, checkpointKey, rt.logger);
    if (checkpointKey && c.AUDIT_CHECKPOINT_INTERVAL_MS > 0) {
      let running = false;
      const timer = setInterval(() => {
        if (running) return;
        running = true;
        checkpoints
          .checkpointMovedHeads()
          .catch((err: unknown) => rt.logger.warn({ err }, 'audit checkpoint round failed'))
          .finally(() => {
            running = false;
          });
      }, c.AUDIT_CHECKPOINT_INTERVAL_MS);
      timer.unref();
      rt.onShutdown('audit-checkpoints', async () => clearInterval(timer));
    }
    const refused = new Counter({
      name: 'custos_audit_records_refused_total',
      help: 'Audit records refused because the producing service may not record their action.',
      labelNames: ['producer'],
      registers: [rt.metrics.registry],
    });
    // Every producer (and `unknown`) exported from the start, so an increase() over it is defined.
    for (const producer of [...NATS_SERVICE_NAMES, 'unknown']) refused.inc({ producer }, 0);
    const consumer = new IdempotentConsumer({
      link: events.link,
      stream: events.stream,
      durable: AUDIT_RECORDED_DURABLE,
      filterSubject: auditRecordedFilter(events.subjectPrefix),
      db,
      pool,
      inbox,
      logger: rt.logger,
      // The records at hand are chained together: one transaction per batch, not per record.
      batchHandler: auditRecordedBatchConsumer({
        audit,
        logger: rt.logger,
        refused,
      }),
    });
    consumer.start();
    rt.onShutdown('audit-consumer', () => consumer.stop());
    rt.grpc.add(AuditServiceService, auditGrpc({ keys, audit, checkpoints }), auditAccess);
  },
});
