import { type IdentityKeys, currentCaller } from '@custos/auth';
import type { PolicyServiceServer } from '@custos/proto/custos/policy/v1/service';
import { type AsyncService, currentRequestContext } from '@custos/service-kit';
import type { GrantService } from '../grants/grant-service.js';
import type { IpRuleService } from '../ip-rules/ip-rule-service.js';
import {
  grantChangeOf,
  grantRequestOf,
  ipRuleMessage,
  policyMessage,
  vaultFactsOf,
} from './policy-messages.js';

/** gRPC adapter of PolicyService: verify the caller, decode, call the rules, encode. */
export function policyGrpc(deps: {
  keys: IdentityKeys;
  grants: GrantService;
  ipRules: IpRuleService;
}): AsyncService<PolicyServiceServer> {
  const caller = () => currentCaller(deps.keys);
  return {
    async createPolicy(req) {
      const g = await deps.grants.create(
        await caller(),
        vaultFactsOf(req.vaultId, req.vault),
        grantRequestOf(req.grant),
        req.principalInOrg,
      );
      return { policy: policyMessage(g) };
    },
    async listPolicies(req) {
      const grants = await deps.grants.list(await caller(), vaultFactsOf(req.vaultId, req.vault));
      return { policies: grants.map(policyMessage) };
    },
    async updatePolicy(req) {
      const g = await deps.grants.update(
        await caller(),
        vaultFactsOf(req.vaultId, req.vault),
        req.policyId,
        grantChangeOf(req.change),
      );
      return { policy: policyMessage(g) };
    },
    async deletePolicy(req) {
      await deps.grants.delete(await caller(), vaultFactsOf(req.vaultId, req.vault), req.policyId);
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
      return { rules: (await deps.ipRules.list(await caller())).map(ipRuleMessage) };
    },
    async createIpRule(req) {
      const rule = await deps.ipRules.create(await caller(), {
        cidr: req.cidr,
        ruleType: req.ruleType,
        description: req.description,
      });
      return { rule: ipRuleMessage(rule) };
    },
    async deleteIpRule(req) {
      await deps.ipRules.delete(await caller(), req.ruleId);
      return {};
    },
    async getOrgIpRules() {
      return { rules: (await deps.ipRules.orgRules(await caller())).map(ipRuleMessage) };
    },
  };
}
