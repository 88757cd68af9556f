import { Router } from 'express';
import { z } from 'zod/v4';
import { ApprovalsServiceClient } from '@custos/proto/custos/approvals/v1/service';
import { GuardrailServiceClient } from '@custos/proto/custos/signer/v1/guardrails';
import type { GuardrailChange } from '@custos/proto/custos/identity/v1/agents';
import { CustosError, unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { TokenResponse, credential, noStore, tokenBody } from './auth-routes.js';
import {
  AgentParams,
  AgentResponse,
  AgentSelfResponse,
  CreateAgentBody,
  GUARDRAIL_FIELDS,
  GuardrailChangePendingResponse,
  GuardrailRevisionResponse,
  UpdateAgentBody,
  agentBody,
  agentFields,
  agentSelfBody,
  touchesGuardrails,
} from './agent-schemas.js';
import { type Guards, declareRoute } from './routes.js';
import { STEP_UP_PURPOSES, authConfirmOf } from './step-up.js';
import { bodyOf, intQuery, queryString } from './schemas.js';

/** The approval of a human's guardrail edit (approvals' `policy_change`, target the change hash). */
const POLICY_CHANGE = { action: 'policy_change', targetType: 'agent_guardrails' } as const;

/** The guardrail fields of a GuardrailChange side (a Struct, decoded to JSON). */
const json = (v: Record<string, unknown> | undefined): Record<string, unknown> => v ?? {};

/** Agents (spec §4.4) and the agent-token exchange (spec §4.1, §5.4); identity decides who may do what. */
export function agentRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const identity = peers.identity;
  const call = unaryCaller(identity);
  const approvals = peers.client(ApprovalsServiceClient, 'approvals');
  const callApprovals = unaryCaller(approvals);
  const guardrails = peers.client(GuardrailServiceClient, 'signer');
  const callGuardrails = unaryCaller(guardrails);
  const tag = 'agents';

  /**
   * The agents with their day so far from signer's guardrail ledger (`tx_spent_today_by_chain`,
   * `tx_count_today`); when signer cannot answer, the agents are shown without them.
   */
  const withSpendToday = async (agents: ReturnType<typeof agentBody>[]) => {
    if (agents.length === 0) return agents;
    let spent: Map<string, { spentByFamily: Record<string, string>; count: number }>;
    try {
      const r = await callGuardrails(guardrails.listSpendToday, { agentIds: agents.map((a) => a.id) });
      spent = new Map(r.agents.map((a) => [a.agentId, a]));
    } catch {
      return agents;
    }
    return agents.map((a) => ({
      ...a,
      tx_spent_today_by_chain: spent.get(a.id)?.spentByFamily ?? {},
      tx_count_today: spent.get(a.id)?.count ?? 0,
    }));
  };

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/auth/agent-token',
      access: 'public',
      summary: 'Exchange an agent key (`ocv_`) or a router key (`sk-proxy-v1-`) for an agent token',
      tag: 'auth',
      body: bodyOf({
        api_key: credential('An `ocv_` agent key or an `sk-proxy-v1-` router key'),
        agent_id: z.string().nullish().describe('Optional; when given it must be the key’s agent'),
      }),
      responses: { 200: { description: 'The agent token (no refresh token)', schema: TokenResponse } },
    },
    async (_req, res, { body }) => {
      const r = await call(identity.exchangeAgentCredential, {
        apiKey: body.api_key ?? '',
        agentId: body.agent_id ?? '',
      });
      noStore(res);
      res.json(tokenBody(r.tokens));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/agents',
      access: 'authenticated',
      summary: 'Register an agent (owners and admins); its `ocv_` key is shown only here',
      tag,
      body: CreateAgentBody,
      responses: {
        201: {
          description: 'The agent and its key',
          schema: z.object({ agent: AgentResponse, api_key: z.string() }),
        },
      },
    },
    async (_req, res, { body }) => {
      const r = await call(identity.createAgent, { fields: agentFields(body) });
      noStore(res);
      res.status(201).json({ agent: agentBody(r.agent), api_key: r.apiKey });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/agents',
      access: 'authenticated',
      summary: 'The agents of the caller’s org',
      tag,
      responses: { 200: { description: 'The agents', schema: z.object({ agents: z.array(AgentResponse) }) } },
    },
    async (_req, res) => {
      const r = await call(identity.listAgents, {});
      res.json({ agents: await withSpendToday(r.agents.map(agentBody)) });
    },
  );

  // Declared before /v1/agents/:agent_id so that `me` is not taken for an id.
  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/agents/me',
      access: 'authenticated',
      summary: 'The calling agent’s own record (agents only)',
      tag,
      responses: { 200: { description: 'The agent', schema: AgentSelfResponse } },
    },
    async (_req, res) => {
      const r = await call(identity.getSelfAgent, {});
      res.json(agentSelfBody(r.agent));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/agents/:agent_id',
      access: 'authenticated',
      summary: 'One agent of the caller’s org (an agent may read only itself)',
      tag,
      params: AgentParams,
      responses: { 200: { description: 'The agent', schema: AgentResponse } },
    },
    async (_req, res, { params }) => {
      const r = await call(identity.getAgent, { agentId: params.agent_id });
      res.json((await withSpendToday([agentBody(r.agent)]))[0]);
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'patch',
      path: '/v1/agents/:agent_id',
      access: 'authenticated',
      summary:
        'Change an agent’s fields (owners and admins); null clears a nullable field. When ' +
        '`guardrail_changes_require_approval` is "true", a guardrail edit that widens answers 202 ' +
        'with `pending_approval_id` and applies nothing; resubmit the same body with `approval_id` ' +
        'once another owner or admin approved it',
      tag,
      params: AgentParams,
      body: UpdateAgentBody,
      stepUp: STEP_UP_PURPOSES.agentGuardrailsEdit,
      stepUpWhen: {
        applies: ({ body }) => touchesGuardrails(body),
        description: `when the body sets a guardrail (${GUARDRAIL_FIELDS.join(', ')})`,
      },
      responses: {
        200: { description: 'The agent after the change', schema: AgentResponse },
        202: {
          description: 'The guardrail edit widens and waits for an approval; nothing was applied',
          schema: GuardrailChangePendingResponse,
        },
      },
    },
    async (req, res, { params, body }) => {
      const { approval_id: approvalId, ...rest } = body;
      const fields = agentFields(rest);
      const credential = authConfirmOf(req);
      if (approvalId === undefined) {
        const r = await call(identity.updateAgent, {
          agentId: params.agent_id,
          fields,
          credential,
          dryRun: false,
          approvalId: '',
          approvedChangeHash: '',
        });
        const change = r.guardrailChange;
        if (r.applied || !change?.approvalRequired) {
          res.json(agentBody(r.agent));
          return;
        }
        // Held by identity (nothing written): the approval other owners and admins decide.
        const a = await callApprovals(approvals.createApproval, {
          orgId: '',
          agentId: params.agent_id,
          agentCreatedBy: '',
          action: POLICY_CHANGE.action,
          targetType: POLICY_CHANGE.targetType,
          targetId: change.changeHash,
          summary: {
            title: `Guardrail change (${change.change}) of agent ${r.agent?.name ?? params.agent_id}`,
            body: 'Resubmit the same PATCH with approval_id once approved.',
            fields: [],
          },
          preview: {
            agent_id: params.agent_id,
            change: change.change,
            before: json(change.before),
            after: json(change.after),
          },
          rule: undefined,
          riskTier: 0,
          requirement: undefined,
          expirySecs: '0',
        });
        const id = a.approval?.id ?? '';
        res.setHeader('Location', `/v1/approvals/${encodeURIComponent(id)}`);
        res.status(202).json(pendingBody(params.agent_id, id, change));
        return;
      }
      // A resubmission: the dry run checks the step-up and names the change's hash, the approval is
      // consumed for exactly that hash, then the edit applies if the hash still holds under the
      // agent's row lock (identity's 409 guardrail_change_stale otherwise: the approval is spent).
      const dry = await call(identity.updateAgent, {
        agentId: params.agent_id,
        fields,
        credential,
        dryRun: true,
        approvalId: '',
        approvedChangeHash: '',
      });
      const change = dry.guardrailChange;
      if (!change)
        throw new CustosError('invalid_argument', {
          field: 'approval_id',
          detail: 'approval_id applies only to an edit of guardrail fields',
        });
      // An edit that needs no approval now (it narrows, the guardrails already are so, or the setting
      // is off): the approval stays unspent and the caller sends the edit without it.
      if (!change.approvalRequired)
        throw new CustosError('conflict', {
          field: 'approval_id',
          detail: 'this edit needs no approval now: send it without approval_id (the approval is not used)',
        });
      await callApprovals(approvals.consumeApproval, {
        approvalId,
        orgId: '',
        agentId: params.agent_id,
        action: POLICY_CHANGE.action,
        targetType: POLICY_CHANGE.targetType,
        targetId: change.changeHash,
      });
      const r = await call(identity.updateAgent, {
        agentId: params.agent_id,
        fields,
        credential: '',
        dryRun: false,
        approvalId,
        approvedChangeHash: change.changeHash,
      });
      res.json(agentBody(r.agent));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/org/guardrail-revisions',
      access: 'human',
      summary: 'Applied guardrail edits of the org’s agents, newest first (owners and admins)',
      tag,
      query: z.object({
        agent_id: queryString.max(200).optional().describe('Only this agent’s'),
        limit: intQuery(1, 500, 'At most this many (default 100)').optional(),
      }),
      responses: {
        200: {
          description: 'The revisions: who, when, the guardrail fields before and after, the approval',
          schema: z.object({ revisions: z.array(GuardrailRevisionResponse) }),
        },
      },
    },
    async (_req, res, { query }) => {
      const r = await call(identity.listGuardrailRevisions, {
        agentId: query.agent_id ?? '',
        limit: query.limit ?? 0,
      });
      res.json({
        revisions: r.revisions.map((v) => ({
          id: v.id,
          agent_id: v.agentId,
          actor_id: v.actorId,
          change: v.change as z.infer<typeof GuardrailRevisionResponse>['change'],
          before: json(v.before),
          after: json(v.after),
          approval_id: v.approvalId === '' ? null : v.approvalId,
          created_at: v.createdAt,
        })),
      });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'delete',
      path: '/v1/agents/:agent_id',
      access: 'authenticated',
      summary: 'Deactivate an agent: its keys and tokens stop working, the record stays',
      tag,
      params: AgentParams,
      responses: { 204: { description: 'Deactivated' } },
    },
    async (_req, res, { params }) => {
      await call(identity.deactivateAgent, { agentId: params.agent_id });
      res.status(204).end();
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/agents/:agent_id/rotate-key',
      access: 'authenticated',
      summary: 'Issue a new agent key; the old key and its tokens stop working',
      tag,
      stepUp: STEP_UP_PURPOSES.agentKeyRotate,
      params: AgentParams,
      responses: {
        200: { description: 'The new key, shown only here', schema: z.object({ api_key: z.string() }) },
      },
    },
    async (req, res, { params }) => {
      const r = await call(identity.rotateAgentKey, {
        agentId: params.agent_id,
        credential: authConfirmOf(req),
      });
      noStore(res);
      res.json({ api_key: r.apiKey });
    },
  );

  return router;
}

/** The 202 body of a held guardrail edit. */
function pendingBody(
  agentId: string,
  approvalId: string,
  change: GuardrailChange,
): z.infer<typeof GuardrailChangePendingResponse> {
  return {
    status: 'pending_approval',
    pending_approval_id: approvalId,
    approval_id: approvalId,
    agent_id: agentId,
    change: change.change === 'mixed' ? 'mixed' : 'widen',
    change_hash: change.changeHash,
    before: json(change.before),
    after: json(change.after),
  };
}
