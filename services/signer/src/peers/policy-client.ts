import { Metadata } from '@grpc/grpc-js';
import type { ApprovalRule } from '@custos/proto/custos/identity/v1/agents';
import type { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import { callUnary } from '@custos/service-kit';

/**
 * The policy service as signer uses it: the consensus triggers on an agent's vault policies
 * (DECISIONS.md: the reference's `consensus_trigger` is a rule of that agent's approvals). Signer
 * names the org and agent of the token it verified; policy admits the call by signer's certificate.
 */
export class PolicyClient {
  constructor(private readonly client: PolicyServiceClient) {}

  /** The triggers of the agent's grants, oldest grant first. */
  async approvalRulesOf(orgId: string, agentId: string): Promise<ApprovalRule[]> {
    const r = await callUnary(
      this.client,
      this.client.listAgentApprovalRules,
      { orgId, agentId },
      new Metadata(),
    );
    return r.rules.flatMap((x) => (x.rule ? [x.rule] : []));
  }
}
