import { type IdentityKeys, currentCaller } from '@custos/auth';
import type { ApprovalsServiceServer } from '@custos/proto/custos/approvals/v1/service';
import {
  type AsyncService,
  InvalidArgumentError,
  type RpcAccess,
  currentRequestContext,
} from '@custos/service-kit';
import {
  type ApprovalService,
  POLICY_CHANGE_ACTION,
  approvalRequired,
} from '../approvals/approval-service.js';
import { approvalListPage, approvalMessage, requirementOf, summaryOf } from './approvals-messages.js';

/**
 * Who may call ApprovalsService: the gateway for people and agents (their tokens are verified
 * here); signer alone for the approvals it raises for its transactions and sign intents and for
 * using them once.
 */
export const approvalsAccess: RpcAccess<ApprovalsServiceServer> = {
  default: ['gateway'],
  // The gateway only for a human's guardrail change (`policy_change`), decided in the handlers.
  methods: { createApproval: ['signer', 'gateway'], consumeApproval: ['signer', 'gateway'] },
};

/** Whether the gateway (not signer) made the current call: its certificate's mesh identity. */
const fromGateway = () => currentRequestContext()?.caller === 'gateway';

/**
 * int64 `expiry_secs` (a decimal string on the wire; '' is 0) as a number; 400 unless it is
 * decimal digits only (`Number` would also read '1e3', '0x10' or ' 5') of a safe integer.
 */
export function expirySecsOf(raw: string): number {
  if (raw === '') return 0;
  const n = /^[0-9]{1,16}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n))
    throw new InvalidArgumentError('expiry_secs', 'expiry_secs must be a non-negative decimal integer');
  return n;
}

/** gRPC adapter of ApprovalsService: verify the caller, decode, call the rules, encode. */
export function approvalsGrpc(deps: {
  keys: IdentityKeys;
  approvals: ApprovalService;
}): AsyncService<ApprovalsServiceServer> {
  const caller = () => currentCaller(deps.keys);
  return {
    async requestApproval(req) {
      const a = await deps.approvals.request(await caller(), {
        action: req.action,
        targetType: req.targetType,
        targetId: req.targetId,
        summary: summaryOf(req.summary),
        payload: req.payload,
        reason: req.reason,
        declaredRiskTier: req.declaredRiskTier,
      });
      return { approval: approvalMessage(a) };
    },
    async createApproval(req) {
      if (fromGateway()) {
        // A human's guardrail edit: the org and requester come from the verified token only.
        if (req.action !== POLICY_CHANGE_ACTION)
          throw new InvalidArgumentError(
            'action',
            `the gateway raises ${POLICY_CHANGE_ACTION} approvals only`,
          );
        const a = await deps.approvals.createPolicyChange(await caller(), {
          agentId: req.agentId,
          targetType: req.targetType,
          targetId: req.targetId,
          summary: summaryOf(req.summary),
          preview: req.preview,
          expirySecs: expirySecsOf(req.expirySecs),
        });
        return { approval: approvalMessage(a) };
      }
      // Signer's certificate is the authorization (its platform actions only: create() refuses others).
      const a = await deps.approvals.create({
        orgId: req.orgId,
        agentId: req.agentId,
        agentCreatedBy: req.agentCreatedBy,
        action: req.action,
        targetType: req.targetType,
        targetId: req.targetId,
        summary: summaryOf(req.summary),
        payload: req.payload,
        preview: req.preview,
        rule: req.rule,
        riskTier: req.riskTier,
        requirement: requirementOf(req.requirement),
        expirySecs: expirySecsOf(req.expirySecs),
      });
      return { approval: approvalMessage(a) };
    },
    async getApproval(req) {
      return { approval: approvalMessage(await deps.approvals.get(await caller(), req.approvalId)) };
    },
    async listApprovals(req) {
      const list = await deps.approvals.list(await caller(), {
        status: req.status,
        agentId: req.agentId,
        limit: req.limit,
      });
      return { approvals: approvalListPage(list) };
    },
    async decideApproval(req) {
      const a = await deps.approvals.decide(await caller(), req.approvalId, {
        decision: req.decision,
        reason: req.reason,
        credential: req.credential,
      });
      return { approval: approvalMessage(a) };
    },
    async executePendingApproval(req) {
      return { approval: approvalMessage(await deps.approvals.execute(await caller(), req.approvalId)) };
    },
    async consumeApproval(req) {
      if (fromGateway()) {
        const used = await deps.approvals.consumePolicyChange(await caller(), {
          approvalId: req.approvalId,
          agentId: req.agentId,
          action: req.action,
          targetType: req.targetType,
          targetId: req.targetId,
        });
        return { approval: approvalMessage(used) };
      }
      if (req.action === POLICY_CHANGE_ACTION)
        throw approvalRequired(
          req.approvalId,
          `${POLICY_CHANGE_ACTION} approvals are used by the gateway only`,
        );
      const a = await deps.approvals.consume({
        approvalId: req.approvalId,
        orgId: req.orgId,
        agentId: req.agentId,
        action: req.action,
        targetType: req.targetType,
        targetId: req.targetId,
      });
      return { approval: approvalMessage(a) };
    },
  };
}
