import { Metadata } from '@grpc/grpc-js';
import type { AccountServiceClient } from '@custos/proto/custos/identity/v1/account';
import { callUnary } from '@custos/service-kit';

/**
 * vault-crypto's client of identity's step-up check (SPEC.md §5.9): the gateway declares the
 * step-up of a route, but the owning service checks the credential itself, so a call that skips
 * the gateway's check still needs one. Identity consumes a `rat_` token or checks the password or
 * a TOTP code (with its lockout and audit); a refusal arrives as 403 `step_up_required`.
 */
export class IdentityClient {
  constructor(private readonly account: AccountServiceClient) {}

  /** Confirms the `X-Auth-Confirm` value of the user of `p` for `purpose`, or throws identity's refusal. */
  async confirmStepUp(
    p: { userId: string; orgId: string },
    purpose: string,
    credential: string,
  ): Promise<void> {
    await callUnary(
      this.account,
      this.account.confirmUserStepUp,
      { userId: p.userId, orgId: p.orgId, purpose, credential },
      new Metadata(),
    );
  }
}
