import { type IdentityKeys, currentCaller } from '@custos/auth';
import type { PolicyServiceServer } from '@custos/proto/custos/policy/v1/service';
import { storedRuleMessage } from '@custos/approval-rules';
import type { AsyncService, RpcAccess } from '@custos/service-kit';
import type { GrantService } from '../grants/grant-service.js';
import type { IpRuleService } from '../ip-rules/ip-rule-service.js';
import {
  decisionPrincipalOf,
  grantChangeOf,
  grantRequestOf,
  ipRuleMessage,
  policyMessage,
  vaultFactsOf,
} from './policy-messages.js';

/**
 * Who may call PolicyService: the gateway (users' requests, and the org's IP rules it enforces);
 * Decide only vault-crypto, which verified the principal it asks about; GetAgentScopes only
 * identity, while it mints an agent's token; ListAgentApprovalRules only signer, before it signs.
 */
export const policyAccess: RpcAccess<PolicyServiceServer> = {
  default: ['gateway'],
  methods: {
    decide: ['vault-crypto'],
    getAgentScopes: ['identity'],
    getOrgIpRules: ['gateway'],
    listAgentApprovalRules: ['signer'],
  },
};

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
      // No token comes with the question: vault-crypto names the principal it verified and the
      // client address the gateway gave it; the allow-list makes vault-crypto the only one to ask.
      return deps.grants.decide(decisionPrincipalOf(req.principal), req, req.clientIp || undefined);
    },
    async getAgentScopes(req) {
      // Identity asks for itself while it mints an agent's token (the allow-list admits no one else).
      return deps.grants.agentScopes(undefined, req.orgId, req.agentId);
    },
    async listAgentApprovalRules(req) {
      // Signer asks for the agent whose token it verified (the allow-list admits no one else).
      const rules = await deps.grants.agentApprovalRules(req.orgId, req.agentId);
      return { rules: rules.map((r) => ({ ...r, rule: storedRuleMessage(r.rule) })) };
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
