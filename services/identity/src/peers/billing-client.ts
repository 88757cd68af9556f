import { Metadata } from '@grpc/grpc-js';
import type { BillingServiceClient } from '@custos/proto/custos/billing/v1/service';
import { callUnary } from '@custos/service-kit';

/** An org's cap on active agents (negative: unlimited) and the plan that sets it. */
export interface AgentCap {
  maxAgents: number;
  plan: string;
}

/**
 * What identity asks billing: the org's tier caps. A billing service that cannot answer fails the
 * request (503): an agent is never created over its cap.
 */
export class BillingClient {
  constructor(private readonly billing: BillingServiceClient) {}

  /** The org's cap on active agents and its plan. */
  async agentCap(orgId: string): Promise<AgentCap> {
    const r = await callUnary(this.billing, this.billing.getOrgLimits, { orgId }, new Metadata());
    return { maxAgents: Number(r.limits?.maxAgents ?? 0), plan: r.limits?.plan ?? 'unknown' };
  }
}
