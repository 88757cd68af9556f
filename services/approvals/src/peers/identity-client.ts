import { Metadata } from '@grpc/grpc-js';
import type { AccountServiceClient } from '@custos/proto/custos/identity/v1/account';
import type { Agent } from '@custos/proto/custos/identity/v1/agents';
import type { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import { callUnary } from '@custos/service-kit';
import type { CredentialType } from '../approvals/approval-types.js';

/** The step-up methods identity answers (ConfirmUserStepUpResponse.method). */
const METHODS: readonly string[] = ['reauth_token', 'password', 'totp'];

/**
 * identity as approvals uses it, admitted by approvals' certificate (identity's allow-lists): an
 * agent of an org with its action_approval_policy and creator, and the step-up check of a human
 * deciding an approval. The calls carry no user token: approvals verified the caller's itself and
 * names the org and user from it.
 */
export class IdentityClient {
  constructor(
    private readonly identity: IdentityServiceClient,
    private readonly account: AccountServiceClient,
  ) {}

  /** The agent, when it is in the org (identity's NOT_FOUND otherwise). */
  async agentInOrg(orgId: string, agentId: string): Promise<Agent> {
    const r = await callUnary(this.identity, this.identity.getOrgAgent, { orgId, agentId }, new Metadata());
    if (!r.agent) throw new Error('identity answered GetOrgAgent without an agent');
    return r.agent;
  }

  /**
   * Checks the `X-Auth-Confirm` value of a user for `purpose` and answers the method it proved;
   * identity's refusal (403 `step_up_required`) is thrown as it is.
   */
  async confirmStepUp(
    user: { userId: string; orgId: string },
    purpose: string,
    credential: string,
  ): Promise<CredentialType> {
    const r = await callUnary(
      this.account,
      this.account.confirmUserStepUp,
      { userId: user.userId, orgId: user.orgId, purpose, credential },
      new Metadata(),
    );
    // An identity from before the answer named the method: the credential was checked, but which
    // kind is unknown; the weakest one that needs a step-up is assumed.
    return (METHODS.includes(r.method) ? r.method : 'password') as CredentialType;
  }
}
