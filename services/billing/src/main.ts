import { connectIdentityKeys, tokenTrustOf } from '@custos/auth';
import { runDataService } from '@custos/events';
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
  async start(rt, { db }) {
    const c = rt.config;
    const keys = await connectIdentityKeys(
      {
        redisUrl: c.REDIS_URL,
        redisTlsCaFile: c.REDIS_TLS_CA_FILE,
        identityAddr: c.IDENTITY_ADDR,
        deadlineMs: c.GRPC_DEADLINE_MS,
        trust: tokenTrustOf(c, rt.name),
        tls: rt.tls,
      },
      rt.logger,
      rt.onShutdown,
    );
    const plans = new PlanService(new PlanStore(db), c.BILLING_DEFAULT_PLAN);
    rt.grpc.add(BillingServiceService, billingGrpc({ keys, plans }), billingAccess);
  },
});
