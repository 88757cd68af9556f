import { connectServiceIdentityKeys } from '@custos/auth';
import { runDataService } from '@custos/events';
import { PolicyServiceService } from '@custos/proto/custos/policy/v1/service';
import { configShape } from './config.js';
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
  async start(rt, { db }) {
    const keys = await connectServiceIdentityKeys(rt);
    const grants = new GrantService(new GrantStore(db));
    const ipRules = new IpRuleService(new IpRuleStore(db));
    rt.grpc.add(PolicyServiceService, policyGrpc({ keys, grants, ipRules }), policyAccess);
  },
});
