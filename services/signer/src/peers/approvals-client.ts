import { Metadata } from '@grpc/grpc-js';
import type {
  Approval,
  ConsumeApprovalRequest,
  CreateApprovalRequest,
} from '@custos/proto/custos/approvals/v1/messages';
import type { ApprovalsServiceClient } from '@custos/proto/custos/approvals/v1/service';
import { CustosError, PermissionDeniedError, callUnary } from '@custos/service-kit';

/** The problem type of a refused approval use (SPEC §8, issue 19). */
export const APPROVAL_REQUIRED = 'approval_required';

/** 403 `approval_required`, naming the approval when it is the caller's to know. */
export function approvalRequired(detail: string, approvalId?: string | null): PermissionDeniedError {
  return new PermissionDeniedError(detail, {
    type: APPROVAL_REQUIRED,
    ...(approvalId ? { extensions: { approval_request_id: approvalId } } : {}),
  });
}

/** What signer's approval gate needs of the approvals service (a fake in unit tests). */
export interface Approvals {
  /** A platform-created approval (`agent_transaction`, `agent_sign_intent`); its id. */
  create(r: CreateApprovalRequest): Promise<Approval>;
  /**
   * Uses the approval once for its target; 403 `approval_required` (naming the approval) when the
   * approvals service refuses (not approved, used, expired, another agent's or target's).
   */
  consume(r: ConsumeApprovalRequest): Promise<Approval>;
}

/**
 * The approvals service's ApprovalsService as signer uses it: CreateApproval and ConsumeApproval,
 * authorized by signer's certificate (the calls carry no user token).
 */
export class ApprovalsClient implements Approvals {
  constructor(private readonly client: ApprovalsServiceClient) {}

  async create(r: CreateApprovalRequest): Promise<Approval> {
    const res = await callUnary(this.client, this.client.createApproval, r, new Metadata());
    if (!res.approval?.id) throw new Error('approvals answered CreateApproval without an approval');
    return res.approval;
  }

  async consume(r: ConsumeApprovalRequest): Promise<Approval> {
    try {
      const res = await callUnary(this.client, this.client.consumeApproval, r, new Metadata());
      if (!res.approval) throw new Error('approvals answered ConsumeApproval without an approval');
      return res.approval;
    } catch (err) {
      if (err instanceof CustosError && (err.kind === 'permission_denied' || err.kind === 'not_found')) {
        throw approvalRequired(
          err.type === APPROVAL_REQUIRED
            ? err.detail
            : 'the approval cannot be used for this request (not approved, used, expired or another’s)',
          r.approvalId,
        );
      }
      throw err;
    }
  }
}
