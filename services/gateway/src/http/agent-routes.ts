import { Router } from 'express';
import { z } from 'zod/v4';
import type { IdentityServiceClient } from '@custos/proto/custos/identity/v1/service';
import { unaryCaller } from '@custos/service-kit';
import { TokenResponse, credential, noStore, tokenBody } from './auth-routes.js';
import {
  AgentParams,
  AgentResponse,
  AgentSelfResponse,
  CreateAgentBody,
  GUARDRAIL_FIELDS,
  UpdateAgentBody,
  agentBody,
  agentFields,
  agentSelfBody,
  touchesGuardrails,
} from './agent-schemas.js';
import { type Guards, declareRoute } from './routes.js';
import { STEP_UP_PURPOSES, authConfirmOf } from './step-up.js';
import { bodyOf } from './schemas.js';

/** Agents (spec §4.4) and the agent-token exchange (spec §4.1, §5.4); identity decides who may do what. */
export function agentRoutes(identity: IdentityServiceClient, guards: Guards): Router {
  const router = Router();
  const call = unaryCaller(identity);
  const tag = 'agents';

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
      res.json({ agents: r.agents.map(agentBody) });
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
      res.json(agentBody(r.agent));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'patch',
      path: '/v1/agents/:agent_id',
      access: 'authenticated',
      summary: 'Change an agent’s fields (owners and admins); null clears a nullable field',
      tag,
      params: AgentParams,
      body: UpdateAgentBody,
      stepUp: STEP_UP_PURPOSES.agentGuardrailsEdit,
      stepUpWhen: {
        applies: ({ body }) => touchesGuardrails(body),
        description: `when the body sets a guardrail (${GUARDRAIL_FIELDS.join(', ')})`,
      },
      responses: { 200: { description: 'The agent after the change', schema: AgentResponse } },
    },
    async (req, res, { params, body }) => {
      const r = await call(identity.updateAgent, {
        agentId: params.agent_id,
        fields: agentFields(body),
        credential: authConfirmOf(req),
      });
      res.json(agentBody(r.agent));
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
