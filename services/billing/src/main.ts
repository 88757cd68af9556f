import { connectServiceIdentityKeys } from '@custos/auth';
import { runDataService, startServiceEventMetrics } from '@custos/events';
import { BillingServiceService } from '@custos/proto/custos/billing/v1/service';
import { configShape } from './config.js';
import { SCHEMA } from './db/schema.js';
import { billingAccess, billingGrpc } from './grpc/billing-grpc.js';
import { PlanService } from './plans/plan-service.js';
import { PlanStore } from './plans/plan-store.js';

// Composition root of billing: plans and tier caps (usage and payments come with their issues).
runDataService({
  name: 'billing',
  schema: SCHEMA,
  configShape,
  async start(rt, { db, pool, events }) {
    // Outbox backlog and consumer lag (custos_outbox_*, custos_nats_consumer_*) on /metrics.
    startServiceEventMetrics(rt, { pool, schema: SCHEMA, events });
    const c = rt.config;
    const keys = await connectServiceIdentityKeys(rt);
    const plans = new PlanService(new PlanStore(db), c.BILLING_DEFAULT_PLAN);
    rt.grpc.add(BillingServiceService, billingGrpc({ keys, plans }), billingAccess);
  },
});
