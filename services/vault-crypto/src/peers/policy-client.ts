import { Metadata } from '@grpc/grpc-js';
import type { Principal } from '@custos/auth';
import type { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import { callUnary, currentRequestContext } from '@custos/service-kit';

/** One secret operation policy is asked about. */
export interface DecisionQuestion {
  /** Who wants to perform it, as this service verified from the caller's token. */
  principal: Principal;
  vaultId: string;
  /** The vault's org: policy denies a principal of any other org without reading a grant. */
  vaultOrgId: string;
  path: string;
  permission: 'read' | 'write';
}

/**
 * vault-crypto's client of the policy service (the hot path of every secret operation that is not
 * the vault owner's or an org admin's). No token travels: the question names the principal this
 * service verified and the client address the gateway gave it; policy admits this question from
 * vault-crypto's certificate only.
 */
export class PolicyClient {
  constructor(private readonly policy: PolicyServiceClient) {}

  /**
   * Whether a grant of the principal allows the operation, and how long the same question keeps
   * this answer unless a grant changes (milliseconds; 0: ask each time).
   */
  async decide(q: DecisionQuestion): Promise<{ allowed: boolean; cacheableForMs: number }> {
    const p = q.principal;
    const r = await callUnary(
      this.policy,
      this.policy.decide,
      {
        vaultId: q.vaultId,
        vaultOrgId: q.vaultOrgId,
        path: q.path,
        permission: q.permission,
        principal:
          p.kind === 'user'
            ? { type: 'user', id: p.userId, orgId: p.orgId, environment: '' }
            : { type: 'agent', id: p.agentId, orgId: p.orgId, environment: p.environment ?? '' },
        clientIp: currentRequestContext()?.clientIp ?? '',
      },
      new Metadata(),
    );
    return { allowed: r.allowed, cacheableForMs: r.cacheableForMs };
  }
}
