import { connectIdentityKeys } from '@custos/auth';
import { IdempotentConsumer, runDataService, subjectFor } from '@custos/events';
import { AuditServiceService } from '@custos/proto/custos/audit/v1/service';
import { AuditService } from './chain/audit-service.js';
import { AuditStore } from './chain/audit-store.js';
import { configShape } from './config.js';
import { SCHEMA, inbox } from './db/schema.js';
import { AUDIT_RECORDED_DURABLE, auditRecordedConsumer } from './events/audit-recorded-consumer.js';
import { auditAccess, auditGrpc } from './grpc/audit-grpc.js';

// Composition root of audit: the chain, the consumer of `audit.recorded`, then the gRPC adapter.
runDataService({
  name: 'audit',
  schema: SCHEMA,
  configShape,
  async start(rt, { db, events }) {
    const c = rt.config;
    const keys = await connectIdentityKeys(
      {
        redisUrl: c.REDIS_URL,
        identityAddr: c.IDENTITY_ADDR,
        deadlineMs: c.GRPC_DEADLINE_MS,
        tls: rt.tls,
      },
      rt.logger,
      rt.onShutdown,
    );
    const audit = new AuditService(new AuditStore(db, c.AUDIT_HMAC_KEY), c.AUDIT_HMAC_KEY, rt.logger);
    const consumer = new IdempotentConsumer({
      link: events.link,
      stream: events.stream,
      durable: AUDIT_RECORDED_DURABLE,
      filterSubject: subjectFor(events.subjectPrefix, 'audit.recorded'),
      db,
      inbox,
      logger: rt.logger,
      handler: auditRecordedConsumer({ audit }),
    });
    consumer.start();
    rt.onShutdown('audit-consumer', () => consumer.stop());
    rt.grpc.add(AuditServiceService, auditGrpc({ keys, audit }), auditAccess);
  },
});
