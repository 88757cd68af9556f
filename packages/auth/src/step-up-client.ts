import { Metadata } from '@grpc/grpc-js';
import type { AccountServiceClient } from '@custos/proto/custos/identity/v1/account';
import { callUnary } from '@custos/service-kit';

/**
 * A service's client of identity's step-up check (SPEC.md §5.9, `ConfirmUserStepUp`): the gateway
 * challenges a step-up route, but the service that owns the action checks the credential itself
 * through identity, so a call that skips the gateway still needs one. Identity consumes a `rat_`
 * token of the purpose or checks the password or a TOTP code (with its lockout and its
 * `auth.reauth_failed` record); a refusal arrives as 403 `step_up_required`. Identity answers only
 * the services its access list names (vault-crypto for the org key, signer for signing keys).
 */
export class StepUpClient {
  constructor(private readonly account: AccountServiceClient) {}

  /** Confirms the `X-Auth-Confirm` value of the user of `p` for `purpose`, or throws identity's refusal. */
  async confirm(p: { userId: string; orgId: string }, purpose: string, credential: string): Promise<void> {
    await callUnary(
      this.account,
      this.account.confirmUserStepUp,
      { userId: p.userId, orgId: p.orgId, purpose, credential },
      new Metadata(),
    );
  }
}
