import { Redis } from 'ioredis';
import { connectServiceIdentityKeys, verifierRedisOptions } from '@custos/auth';
import { runDataService, startServiceEventMetrics } from '@custos/events';
import { PolicyServiceService } from '@custos/proto/custos/policy/v1/service';
import { describeError } from '@custos/service-kit';
import { configShape } from './config.js';
import { decisionGenerationBump } from './grants/decision-generation.js';
import { SCHEMA } from './db/schema.js';
import { GrantService } from './grants/grant-service.js';
import { GrantStore } from './grants/grant-store.js';
import { policyAccess, policyGrpc } from './grpc/policy-grpc.js';
import { IpRuleService } from './ip-rules/ip-rule-service.js';
import { IpRuleStore } from './ip-rules/ip-rule-store.js';

// Composition root of policy: identity's keys, grants and decisions, IP rules, then the gRPC
// adapter. Policy calls no other service (facts about vaults and principals arrive in requests);
// identity is asked only for the keys that verify callers' tokens.
runDataService({
  name: 'policy',
  schema: SCHEMA,
  configShape,
  async start(rt, { db, pool, events }) {
    // Outbox backlog and consumer lag (custos_outbox_*, custos_nats_consumer_*) on /metrics.
    startServiceEventMetrics(rt, { pool, schema: SCHEMA, events });
    const keys = await connectServiceIdentityKeys(rt);
    const c = rt.config;
    // Its own connection for the decision generation (the keys' one only reads revocations).
    const redis = new Redis(c.REDIS_URL, verifierRedisOptions(c.REDIS_URL, c));
    redis.on('error', (err) => rt.logger.warn({ err: describeError(err) }, 'redis error'));
    rt.onShutdown('redis-generation', async () => {
      redis.disconnect();
    });
    const grants = new GrantService(
      new GrantStore(db, pool),
      () => new Date(),
      decisionGenerationBump(redis, rt.logger),
    );
    const ipRules = new IpRuleService(new IpRuleStore(db));
    rt.grpc.add(PolicyServiceService, policyGrpc({ keys, grants, ipRules }), policyAccess);
  },
});
