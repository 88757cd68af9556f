import { Metadata } from '@grpc/grpc-js';
import type { BillingServiceClient } from '@custos/proto/custos/billing/v1/service';
import { ExpiringLru, callUnary } from '@custos/service-kit';

/** An org's caps on what vault-crypto stores; negative means unlimited. */
export interface VaultLimits {
  plan: string;
  maxVaults: number;
  maxSecrets: number;
}

const TTL_MS = 30_000;

/**
 * vault-crypto's client of the billing service: the org's tier caps, remembered 30 s so that
 * writes do not each cost a hop. A failure to ask is a failure of the write (fail closed, 503),
 * never an uncapped write.
 */
export class BillingClient {
  private readonly cache = new ExpiringLru<VaultLimits>(10_000);

  constructor(private readonly billing: BillingServiceClient) {}

  /** The caps of the org. */
  async limitsOf(orgId: string): Promise<VaultLimits> {
    const hit = this.cache.get(orgId, Date.now());
    if (hit) return hit;
    const r = await callUnary(this.billing, this.billing.getOrgLimits, { orgId }, new Metadata());
    const limits = {
      plan: r.limits?.plan ?? 'unknown',
      maxVaults: Number(r.limits?.maxVaults ?? 0),
      maxSecrets: Number(r.limits?.maxSecrets ?? 0),
    };
    this.cache.set(orgId, limits, Date.now() + TTL_MS);
    return limits;
  }
}
