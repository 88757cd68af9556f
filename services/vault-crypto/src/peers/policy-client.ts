import { Metadata } from '@grpc/grpc-js';
import type { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import { callUnary } from '@custos/service-kit';

/** One secret operation policy is asked about. */
export interface DecisionQuestion {
  vaultId: string;
  /** The vault's org: policy denies a principal of any other org without reading a grant. */
  vaultOrgId: string;
  path: string;
  permission: 'read' | 'write';
}

/**
 * vault-crypto's client of the policy service (the hot path of every secret operation that is not
 * the vault owner's or an org admin's). The call carries the caller's JWT (the client interceptor
 * forwards it), so policy decides for that principal.
 */
export class PolicyClient {
  constructor(private readonly policy: PolicyServiceClient) {}

  /** Whether a grant of the caller allows the operation. */
  async decide(q: DecisionQuestion): Promise<boolean> {
    const r = await callUnary(this.policy, this.policy.decide, q, new Metadata());
    return r.allowed;
  }
}
