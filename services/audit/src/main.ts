import { connectServiceIdentityKeys } from '@custos/auth';
import { IdempotentConsumer, auditRecordedFilter, runDataService } from '@custos/events';
import { AuditServiceService } from '@custos/proto/custos/audit/v1/service';
import { Counter } from 'prom-client';
import { AuditService } from './chain/audit-service.js';
import { AuditStore } from './chain/audit-store.js';
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
    const c = rt.config;
    const keys = await connectServiceIdentityKeys(rt);
    const audit = new AuditService(new AuditStore(db, c.AUDIT_HMAC_KEY), c.AUDIT_HMAC_KEY, rt.logger);
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
        refused: new Counter({
          name: 'custos_audit_records_refused_total',
          help: 'Audit records refused because the producing service may not record their action.',
          labelNames: ['producer'],
          registers: [rt.metrics.registry],
        }),
      }),
    });
    consumer.start();
    rt.onShutdown('audit-consumer', () => consumer.stop());
    rt.grpc.add(AuditServiceService, auditGrpc({ keys, audit }), auditAccess);
  },
});
