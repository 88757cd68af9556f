import { Router } from 'express';
import { z } from 'zod/v4';
import { GuardrailServiceClient } from '@custos/proto/custos/signer/v1/guardrails';
import { unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import { AgentParams, UpdateAgentBody, agentFields } from './agent-schemas.js';
import { type Guards, declareRoute } from './routes.js';
import { bodyOf, dateTime } from './schemas.js';

// SPEC §4.4 `POST /v1/agents/{id}/guardrails/replay`: a draft of an agent's guardrails judged by
// signer against the agent's signed transactions of the last `days` days. Read-only.

/** The settings a draft may hold: those the guardrail evaluator reads, shaped as on the agent. */
const DraftGuardrails = UpdateAgentBody.pick({
  execution_guardrails: true,
  per_chain_guardrails: true,
  tx_max_value_eth: true,
  tx_daily_limit_eth: true,
  tx_max_value: true,
  tx_daily_limit: true,
  tx_max_per_day: true,
  max_fee_per_gas_gwei: true,
  max_gas_limit: true,
  tx_to_allowlist: true,
  tx_allowed_chains: true,
  eip712_domain_allowlist: true,
  eip712_default_policy: true,
}).describe("Guardrail fields applied over the agent's current ones (absent: unchanged; null: unset)");

const ReplayBody = bodyOf({
  days: z.number().int().min(1).max(90).default(7).describe('How many days back, 1 to 90; default 7'),
  draft_guardrails: DraftGuardrails.default({}),
});

const ReplayResponse = z.object({
  agent_id: z.string(),
  since: dateTime,
  enforcement: z
    .enum(['log', 'approve', 'enforce'])
    .describe("The draft's: `enforce` would refuse, `approve` would hold for a human, `log` would record"),
  transactions_evaluated: z.number().int(),
  truncated: z
    .boolean()
    .describe('More transactions than one replay evaluates (10,000): the oldest were left out'),
  would_deny_count: z.number().int(),
  by_reason_code: z.record(z.string(), z.number().int()),
  would_deny: z
    .array(
      z.object({
        transaction_id: z.string(),
        created_at: dateTime,
        chain: z.string(),
        to: z.string().nullable(),
        value: z.string().describe("In the chain's smallest unit"),
        violations: z.array(z.object({ reason_code: z.string(), field: z.string(), detail: z.string() })),
      }),
    )
    .describe('Oldest first'),
});

/** The guardrail replay route. */
export function guardrailRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const replay = peers.client(GuardrailServiceClient, 'signer');
  const call = unaryCaller(replay);

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/agents/:agent_id/guardrails/replay',
      access: 'authenticated',
      summary:
        "Dry-run a draft of an agent's guardrails against its transactions of the last days (owners and admins; read-only)",
      tag: 'agents',
      params: AgentParams,
      body: ReplayBody,
      responses: { 200: { description: 'What the draft would have denied', schema: ReplayResponse } },
    },
    async (_req, res, { params, body }) => {
      const r = await call(replay.replayGuardrails, {
        agentId: params.agent_id,
        days: body.days,
        draft: agentFields(body.draft_guardrails),
      });
      const byReason: Record<string, number> = {};
      for (const d of r.denials)
        for (const v of d.verdicts) byReason[v.reasonCode] = (byReason[v.reasonCode] ?? 0) + 1;
      res.json({
        agent_id: params.agent_id.toLowerCase(),
        since: r.since,
        enforcement: (['log', 'approve', 'enforce'] as const).find((m) => m === r.enforcement) ?? 'enforce',
        transactions_evaluated: r.evaluated,
        truncated: r.truncated,
        would_deny_count: r.denials.length,
        by_reason_code: byReason,
        would_deny: r.denials.map((d) => ({
          transaction_id: d.transactionId,
          created_at: d.createdAt,
          chain: d.chain,
          to: d.to || null,
          value: d.value,
          violations: d.verdicts.map((v) => ({
            reason_code: v.reasonCode,
            field: v.field,
            detail: v.detail,
          })),
        })),
      });
    },
  );

  return router;
}
