import { Router } from 'express';
import { z } from 'zod/v4';
import { ApprovalsServiceClient } from '@custos/proto/custos/approvals/v1/service';
import { CustosError, unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import {
  ActionSchema,
  ApprovalResponse,
  DECISIONS,
  ExecutePendingApprovalResponse,
  PayloadSchema,
  SummarySchema,
  approvalBody,
  summaryMessage,
} from './approval-schemas.js';
import { type Problem, sendProblem } from './problem.js';
import { type Guards, declareRoute } from './routes.js';
import { bodyOf, idParam, intQuery, must, queryString } from './schemas.js';
import {
  AUTH_CONFIRM_HEADER,
  STEP_UP_ACCEPTED,
  STEP_UP_PURPOSES,
  STEP_UP_REQUIRED,
  authConfirmOf,
  stepUpChallenge,
} from './step-up.js';

const tier = z.number().int().min(1).max(3);

const RequestBody = bodyOf({
  action: ActionSchema,
  target_type: z.string().min(1, 'is required').max(100),
  target_id: z.string().min(1, 'is required').max(500),
  summary: SummarySchema,
  payload: PayloadSchema.optional().describe('Free-form JSON object (at most 64 KiB of JSON text)'),
  reason: z.string().max(1000).optional(),
  declared_risk_tier: tier
    .optional()
    .describe("The requester's tier, 1-3 (the enforced tier is never lower)"),
  risk_tier: tier.optional().describe('Deprecated name of declared_risk_tier'),
});

const DecideBody = bodyOf({
  decision: z
    .enum(DECISIONS, { error: `must be one of ${DECISIONS.join(', ')}` })
    .describe('`approve`/`approved` or `reject`/`rejected`/`denied` (stored as `approved` or `rejected`)'),
  reason: z.string().max(1000).optional(),
});

const ApprovalParams = z.object({ id: idParam });

const tag = 'approvals';

/**
 * Approvals (issue 19, SPEC.md §4.5): an agent asks, humans of its org decide with the proof of
 * presence the tier needs, and a consensus approval is executed once approved. The approvals
 * service decides who may (agents only ask; humans only list, decide and execute; the agent an
 * approval concerns and the org's humans read it) and checks the step-up credential.
 */
export function approvalRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const approvals = peers.client(ApprovalsServiceClient, 'approvals');
  const call = unaryCaller(approvals);

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/approvals/request',
      access: 'authenticated',
      summary:
        'Ask the humans of the org to approve an action (agents only; a human is refused with 403; 422 when the ' +
        "agent's stored approval policy asks for a consensus no vote at this tier can meet)",
      tag,
      body: RequestBody,
      responses: {
        202: {
          description: 'Asked: pending; `Location` is /v1/approvals/{id}',
          schema: ApprovalResponse,
        },
      },
    },
    async (_req, res, { body }) => {
      const r = await call(approvals.requestApproval, {
        action: body.action,
        targetType: body.target_type,
        targetId: body.target_id,
        summary: summaryMessage(body.summary),
        payload: body.payload,
        reason: body.reason ?? '',
        declaredRiskTier: body.declared_risk_tier ?? body.risk_tier ?? 0,
      });
      const a = approvalBody(must(r.approval, 'approval'));
      res.setHeader('Location', `/v1/approvals/${encodeURIComponent(a.id)}`);
      res.status(202).json(a);
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/approvals',
      access: 'human',
      summary: "The org's approvals, pending first, then newest first",
      tag,
      query: z.object({
        status: z
          .enum(['pending', 'approved', 'rejected', 'expired', 'executed'], {
            error: 'must be one of pending, approved, rejected, expired, executed',
          })
          .optional(),
        agent_id: queryString.max(200).optional().describe("Only this agent's"),
        limit: intQuery(1, 500, 'At most this many (default 100)').optional(),
      }),
      responses: {
        200: {
          description:
            'The approvals. In list items `payload`, `preview` and `rule` are null and the summary ' +
            'texts and vote reasons are cut to 200 characters (GET /v1/approvals/{id} has them whole). ' +
            'A page stops early, with fewer than `limit` items, once it would pass about 3 MiB: page by `limit`.',
          schema: z.object({ approvals: z.array(ApprovalResponse) }),
        },
      },
    },
    async (_req, res, { query }) => {
      const r = await call(approvals.listApprovals, {
        status: query.status ?? '',
        agentId: query.agent_id ?? '',
        limit: query.limit ?? 0,
      });
      res.json({ approvals: r.approvals.map(approvalBody) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/approvals/:id',
      access: 'authenticated',
      summary: 'One approval (the agent it concerns; humans of its org)',
      tag,
      params: ApprovalParams,
      responses: { 200: { description: 'The approval', schema: ApprovalResponse } },
    },
    async (_req, res, { params }) => {
      const r = await call(approvals.getApproval, { approvalId: params.id });
      res.json(approvalBody(must(r.approval, 'approval')));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/approvals/:id/decide',
      access: 'human',
      summary:
        'Approve or reject (humans of the org; tier 2 needs a step-up, tier 3 a TOTP code; a consensus approval takes one vote per human)',
      tag,
      params: ApprovalParams,
      body: DecideBody,
      headers: {
        [AUTH_CONFIRM_HEADER]:
          `Tier 1: not needed. Tier 2: a \`rat_\` token for \`${STEP_UP_PURPOSES.approvalDecide}\`, the password, or a current TOTP code; tier 3: a current TOTP code. ` +
          `Without it on tier 2 or 3: 401 \`${STEP_UP_REQUIRED}\` naming the purpose and the accepted credentials (${STEP_UP_ACCEPTED.join(', ')}); a wrong one, or not a TOTP code on tier 3: 403 \`${STEP_UP_REQUIRED}\`.`,
      },
      responses: {
        200: { description: 'The approval after the decision (or vote)', schema: ApprovalResponse },
        409: { description: 'Already decided, executed or expired; or this human already voted' },
      },
    },
    async (req, res, { params, body }) => {
      const credential = authConfirmOf(req);
      try {
        const r = await call(approvals.decideApproval, {
          approvalId: params.id,
          decision: body.decision,
          reason: body.reason ?? '',
          credential,
        });
        res.json(approvalBody(must(r.approval, 'approval')));
      } catch (err) {
        // The tier is the service's to know, so the header is not required up front: the
        // service's refusal of a missing credential is answered with the gateway's challenge,
        // as a step-up route's is (purpose and accepted credentials).
        const challenge = missingStepUpChallenge(err, credential);
        if (challenge) return sendProblem(res, challenge);
        throw err;
      }
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/pending-approvals/:id/execute',
      access: 'human',
      summary:
        'Execute an approved consensus approval: mints the single-use token that satisfies the signing gate (a human of the org holding a required role)',
      tag,
      params: ApprovalParams,
      responses: {
        200: { description: 'Executed', schema: ExecutePendingApprovalResponse },
        409: {
          description: 'Not approved yet, already executed, expired, or not a consensus approval',
        },
      },
    },
    async (_req, res, { params }) => {
      const r = await call(approvals.executePendingApproval, { approvalId: params.id });
      const a = must(r.approval, 'approval');
      res.json({
        pending_approval_id: a.id,
        status: 'executed',
        executed_at: a.executedAt,
        result: { approval_id: a.id, target_type: a.targetType, target_id: a.targetId },
      });
    },
  );

  return router;
}

/**
 * The service's `step_up_required` refusal of a decision made without `X-Auth-Confirm`: answered
 * with the gateway's 401 challenge (purpose `approval.decide`, the accepted credentials; the
 * service's `accepted`, a comma-separated list such as `totp` for tier 3, when it names one).
 */
function missingStepUpChallenge(err: unknown, credential: string): Problem | undefined {
  if (credential !== '' || !(err instanceof CustosError) || err.type !== STEP_UP_REQUIRED) return undefined;
  const challenge = stepUpChallenge(STEP_UP_PURPOSES.approvalDecide);
  const accepted = err.extensions['accepted'];
  return accepted ? { ...challenge, detail: err.detail, accepted: accepted.split(',') } : challenge;
}
