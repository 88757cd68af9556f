import { type IdentityKeys, currentCaller } from '@custos/auth';
import type { PolicyServiceServer } from '@custos/proto/custos/policy/v1/service';
import { type AsyncService, currentRequestContext } from '@custos/service-kit';
import type { GrantService } from '../grants/grant-service.js';
import type { IpRuleService } from '../ip-rules/ip-rule-service.js';

/** gRPC adapter of PolicyService: verify the caller, decode, call the rules, encode. */
export function policyGrpc(deps: {
  keys: IdentityKeys;
  grants: GrantService;
  ipRules: IpRuleService;
}): AsyncService<PolicyServiceServer> {
  const caller = () => currentCaller(deps.keys);
  return {
    async createPolicy(req) {
      return { policy: await deps.grants.create(await caller(), req.vaultId, req.fields ?? {}) };
    },
    async listPolicies(req) {
      return { policies: await deps.grants.list(await caller(), req.vaultId) };
    },
    async updatePolicy(req) {
      return {
        policy: await deps.grants.update(await caller(), req.vaultId, req.policyId, req.fields ?? {}),
      };
    },
    async deletePolicy(req) {
      await deps.grants.delete(await caller(), req.vaultId, req.policyId);
      return {};
    },
    async decide(req) {
      return deps.grants.decide(await caller(), req, currentRequestContext()?.clientIp);
    },
    async getAgentScopes(req) {
      // Identity asks without a caller while it mints a token; a forwarded request carries one.
      const who = currentRequestContext()?.authorization ? await caller() : undefined;
      return deps.grants.agentScopes(who, req.orgId, req.agentId);
    },
    async listIpRules() {
      return { rules: await deps.ipRules.list(await caller()) };
    },
    async createIpRule(req) {
      return { rule: await deps.ipRules.create(await caller(), req.fields ?? {}) };
    },
    async deleteIpRule(req) {
      await deps.ipRules.delete(await caller(), req.ruleId);
      return {};
    },
    async getOrgIpRules() {
      return { rules: await deps.ipRules.orgRules(await caller()) };
    },
  };
}
