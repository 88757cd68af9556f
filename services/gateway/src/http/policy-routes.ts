import { type Request, Router } from 'express';
import { z } from 'zod/v4';
import { AccountServiceClient } from '@custos/proto/custos/identity/v1/account';
import { OrgServiceClient } from '@custos/proto/custos/identity/v1/orgs';
import type {
  GrantChange,
  GrantConditions,
  Policy,
  VaultFacts,
} from '@custos/proto/custos/policy/v1/messages';
import { PolicyServiceClient } from '@custos/proto/custos/policy/v1/service';
import { CustosError, isUuid, unaryCaller } from '@custos/service-kit';
import type { Peers } from '../peers.js';
import {
  ApprovalRuleSchema,
  ConsensusTriggerSchema,
  approvalRuleBody,
  approvalRuleMessage,
} from './agent-schemas.js';
import { sendProblem } from './problem.js';
import { type Guards, declareRoute } from './routes.js';
import { STEP_UP_PURPOSES, authConfirmOf, stepUpChallenge } from './step-up.js';
import { bodyOf, dateTime, idParam, isoDateTime, must } from './schemas.js';

// The policy service owns the rules of grants (who may manage them, path globs, networks, time
// zones, deny wins); the shapes are checked here. The facts it needs from other services — who owns
// the vault, whether the principal is in the org — are gathered here too, with the caller's token:
// policy calls no service, so the call graph stays a DAG (gateway → identity, vault-crypto, policy;
// vault-crypto → policy for decisions; identity → policy for agent scopes). Policy trusts these
// facts because only the gateway may call it (the mTLS caller allow-lists of the next issue).

const clock = z.string().regex(/^([01]\d|2[0-3]):([0-5]\d)$/, 'must be a time of day HH:MM (00:00 to 23:59)');

const Conditions = z
  .strictObject({
    ip_cidrs: z.array(z.string()).min(1).max(100).nullish().describe('Client addresses or CIDRs'),
    time_window: z
      .strictObject({
        start: clock,
        end: clock,
        timezone: z.string().max(64).nullish().describe('IANA time zone; default UTC'),
        days: z.array(z.string()).min(1).max(7).nullish().describe('`mon` … `sun`; default every day'),
      })
      .nullish()
      .describe('Start inclusive, end exclusive; spans midnight when start > end'),
    environment_in: z.array(z.string()).min(1).max(20).nullish().describe("The agent's environment"),
  })
  .describe('Every condition given must hold');

const permissions = z
  .array(z.string())
  .min(1, 'must be a non-empty list of read, write')
  .refine((l) => l.every((p) => p === 'read' || p === 'write'), 'may hold only read and write')
  .describe('`read`, `write`');
const pattern = z
  .string()
  .min(1, 'must not be empty')
  .max(512)
  .describe('`/`-separated segments, each `*` (one segment), `**` (any number) or a literal');
const effect = z.enum(['allow', 'deny']);
const priority = z.number().int().min(0).max(1_000_000).describe('Higher wins; default 0');
// Refused whenever present (a different principal is a different grant); a custom issue, so the
// 400 says why rather than that the field is missing.
const unchangeable = z
  .unknown()
  .refine((v) => v === undefined, 'cannot be changed; delete the policy and create another')
  .optional()
  .describe('Cannot be changed: delete the policy and create another');

const CreateBody = bodyOf({
  secret_path_pattern: pattern,
  principal_type: z.enum(['user', 'agent']),
  principal_id: z.string().refine(isUuid, 'must be a UUID').describe('A member or an agent of the org'),
  permissions,
  conditions: Conditions.nullish(),
  effect: effect.nullish().describe('Default `allow`; a deny wins at equal priority'),
  priority: priority.nullish(),
  expires_at: isoDateTime.nullish().describe('In the future; default never'),
  consensus_trigger: ConsensusTriggerSchema.nullish().describe(
    "Agent principals only: the agent's matching transactions and sign intents need this approval (as a rule of its action_approval_policy)",
  ),
});

/** PUT changes the fields given; null resets one to its default (DECISIONS: partial PUT). */
const UpdateBody = bodyOf({
  secret_path_pattern: pattern.optional(),
  permissions: permissions.optional(),
  conditions: Conditions.nullish(),
  effect: effect.nullish(),
  priority: priority.nullish(),
  expires_at: isoDateTime.nullish(),
  consensus_trigger: ConsensusTriggerSchema.nullish().describe('null removes it'),
  principal_type: unchangeable,
  principal_id: unchangeable,
});

const PolicyResponse = z.object({
  id: z.string(),
  vault_id: z.string(),
  secret_path_pattern: z.string(),
  principal_type: z.enum(['user', 'agent']),
  principal_id: z.string(),
  permissions: z.array(z.enum(['read', 'write'])),
  conditions: z.object({
    ip_cidrs: z.array(z.string()).optional(),
    time_window: z
      .object({
        start: z.string(),
        end: z.string(),
        timezone: z.string().optional(),
        days: z.array(z.string()).optional(),
      })
      .optional(),
    environment_in: z.array(z.string()).optional(),
  }),
  effect,
  priority: z.number().int(),
  expires_at: dateTime.nullable(),
  consensus_trigger: ApprovalRuleSchema.nullable(),
  created_by: z.string(),
  created_by_type: z.literal('user'),
  created_at: dateTime,
  updated_at: dateTime,
});

type ConditionsBody = z.infer<typeof Conditions>;

function conditionsMessage(c: ConditionsBody): GrantConditions {
  const w = c.time_window;
  return {
    ipCidrs: c.ip_cidrs ?? [],
    ...(w
      ? {
          timeWindow: {
            start: w.start,
            end: w.end,
            ...(w.timezone != null ? { timezone: w.timezone } : {}),
            days: w.days ?? [],
          },
        }
      : {}),
    environmentIn: c.environment_in ?? [],
  };
}

/** The HTTP shape of a grant (the reference's PolicyResponse plus `updated_at`). */
export function policyBody(p: Policy): z.infer<typeof PolicyResponse> {
  const c = p.conditions;
  const w = c?.timeWindow;
  return {
    id: p.id,
    vault_id: p.vaultId,
    secret_path_pattern: p.secretPathPattern,
    principal_type: p.principalType as 'user' | 'agent',
    principal_id: p.principalId,
    permissions: p.permissions as Array<'read' | 'write'>,
    conditions: {
      ...(c?.ipCidrs.length ? { ip_cidrs: c.ipCidrs } : {}),
      ...(w
        ? {
            time_window: {
              start: w.start,
              end: w.end,
              ...(w.timezone !== undefined ? { timezone: w.timezone } : {}),
              ...(w.days.length ? { days: w.days } : {}),
            },
          }
        : {}),
      ...(c?.environmentIn.length ? { environment_in: c.environmentIn } : {}),
    },
    effect: p.effect as 'allow' | 'deny',
    priority: p.priority,
    expires_at: p.expiresAt ?? null,
    consensus_trigger: p.consensusTrigger ? approvalRuleBody(p.consensusTrigger) : null,
    created_by: p.createdBy,
    created_by_type: 'user',
    created_at: p.createdAt,
    updated_at: p.updatedAt,
  };
}

/** A partial update: given fields change, null ones are cleared back to their default. */
function changeMessage(b: z.infer<typeof UpdateBody>): GrantChange {
  const cleared = (['conditions', 'effect', 'priority', 'expires_at', 'consensus_trigger'] as const).filter(
    (k) => b[k] === null,
  );
  return {
    secretPathPattern: b.secret_path_pattern,
    permissions: b.permissions ?? [],
    ...(b.conditions ? { conditions: conditionsMessage(b.conditions) } : {}),
    effect: b.effect ?? undefined,
    priority: b.priority ?? undefined,
    expiresAt: b.expires_at ?? undefined,
    ...(b.consensus_trigger ? { consensusTrigger: approvalRuleMessage(b.consensus_trigger) } : {}),
    clearedFields: cleared,
  };
}

const vaultParams = z.object({ vault_id: idParam });
const policyParams = z.object({ vault_id: idParam, policy_id: idParam });
const tag = 'policies';

/** Secret-path policies (grants) of a vault (spec §2.3, §4.3). */
export function policyRoutes(peers: Peers, guards: Guards): Router {
  const router = Router();
  const policy = peers.client(PolicyServiceClient, 'policy');
  const orgs = peers.client(OrgServiceClient, 'identity');
  const call = unaryCaller(policy);
  const vc = unaryCaller(peers.vaultCrypto);
  const identity = unaryCaller(peers.identity);
  const orgCall = unaryCaller(orgs);
  const account = peers.client(AccountServiceClient, 'identity');
  const accountCall = unaryCaller(account);

  /**
   * A consensus_trigger decides who must agree before an agent signs, as the agent's own rules do:
   * setting, changing or removing one needs the guardrail step-up, confirmed with identity here
   * (the policy service calls no one) before policy is asked; policy also keeps it to owners and
   * admins.
   */
  const confirmTriggerStepUp = async (req: Request): Promise<void> => {
    await accountCall(account.confirmStepUp, {
      purpose: STEP_UP_PURPOSES.agentGuardrailsEdit,
      credential: authConfirmOf(req),
    });
  };
  /** The step-up when a body sets a trigger (`setsOnly`: a create's null sets nothing) or clears one. */
  const triggerStepUp = (setsOnly: boolean) => ({
    stepUp: STEP_UP_PURPOSES.agentGuardrailsEdit,
    stepUpWhen: {
      applies: ({ body }: { body: { consensus_trigger?: unknown } }) =>
        setsOnly ? body.consensus_trigger != null : body.consensus_trigger !== undefined,
      description: setsOnly
        ? 'when the body sets consensus_trigger'
        : 'when the body sets or clears consensus_trigger',
    },
  });

  /** Who owns the vault: vault-crypto answers for the caller's org only (404 otherwise). */
  const vaultFacts = async (vaultId: string): Promise<{ vaultId: string; vault: VaultFacts }> => {
    const v = await vc(peers.vaultCrypto.describeVault, { vaultId });
    return {
      vaultId: v.vaultId,
      vault: { orgId: v.orgId, createdBy: v.createdBy, createdByType: v.createdByType, isSystem: v.isSystem },
    };
  };

  /**
   * Whether the grant's principal is a member or an agent of the caller's org. A refusal to tell
   * (an agent may not list members) reads as "no": policy refuses such a caller before it looks.
   */
  const principalInOrg = async (type: 'user' | 'agent', id: string): Promise<boolean> => {
    try {
      if (type === 'agent') {
        await identity(peers.identity.getAgent, { agentId: id });
        return true;
      }
      const r = await orgCall(orgs.listOrgMembers, {});
      return r.members.some((m) => m.id.toLowerCase() === id);
    } catch (err) {
      if (err instanceof CustosError && (err.kind === 'not_found' || err.kind === 'permission_denied')) {
        return false;
      }
      throw err;
    }
  };

  declareRoute(
    router,
    guards,
    {
      method: 'post',
      path: '/v1/vaults/:vault_id/policies',
      access: 'authenticated',
      summary: "Add a grant on a vault (an org owner or admin, or the vault's creator)",
      tag,
      params: vaultParams,
      body: CreateBody,
      ...triggerStepUp(true),
      responses: { 201: { description: 'The grant', schema: PolicyResponse } },
    },
    async (req, res, { params, body }) => {
      if (body.consensus_trigger != null) await confirmTriggerStepUp(req);
      const facts = await vaultFacts(params.vault_id);
      const principalId = body.principal_id.toLowerCase();
      const r = await call(policy.createPolicy, {
        ...facts,
        grant: {
          secretPathPattern: body.secret_path_pattern,
          principalType: body.principal_type,
          principalId,
          permissions: body.permissions,
          ...(body.conditions ? { conditions: conditionsMessage(body.conditions) } : {}),
          effect: body.effect ?? undefined,
          priority: body.priority ?? undefined,
          expiresAt: body.expires_at ?? undefined,
          ...(body.consensus_trigger
            ? { consensusTrigger: approvalRuleMessage(body.consensus_trigger) }
            : {}),
        },
        principalInOrg: await principalInOrg(body.principal_type, principalId),
      });
      res.status(201).json(policyBody(must(r.policy, 'policy')));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'get',
      path: '/v1/vaults/:vault_id/policies',
      access: 'authenticated',
      summary: "A vault's grants, expired ones included",
      tag,
      params: vaultParams,
      responses: {
        200: { description: 'Oldest first', schema: z.object({ policies: z.array(PolicyResponse) }) },
      },
    },
    async (_req, res, { params }) => {
      const r = await call(policy.listPolicies, await vaultFacts(params.vault_id));
      res.json({ policies: r.policies.map(policyBody) });
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'put',
      path: '/v1/vaults/:vault_id/policies/:policy_id',
      access: 'authenticated',
      summary: 'Change the fields given of a grant; null resets a field to its default',
      tag,
      params: policyParams,
      body: UpdateBody,
      ...triggerStepUp(false),
      responses: { 200: { description: 'The grant', schema: PolicyResponse } },
    },
    async (req, res, { params, body }) => {
      if (body.consensus_trigger !== undefined) await confirmTriggerStepUp(req);
      const r = await call(policy.updatePolicy, {
        ...(await vaultFacts(params.vault_id)),
        policyId: params.policy_id,
        change: changeMessage(body),
      });
      res.json(policyBody(must(r.policy, 'policy')));
    },
  );

  declareRoute(
    router,
    guards,
    {
      method: 'delete',
      path: '/v1/vaults/:vault_id/policies/:policy_id',
      access: 'authenticated',
      summary: 'Remove a grant',
      tag,
      params: policyParams,
      responses: { 204: { description: 'Removed' } },
    },
    async (req, res, { params }) => {
      // Removing a grant that carries a consensus_trigger removes the trigger: the same step-up.
      const facts = await vaultFacts(params.vault_id);
      const listed = await call(policy.listPolicies, facts);
      const target = listed.policies.find((x) => x.id.toLowerCase() === params.policy_id.toLowerCase());
      if (target?.consensusTrigger) {
        if (authConfirmOf(req) === '')
          return sendProblem(res, stepUpChallenge(STEP_UP_PURPOSES.agentGuardrailsEdit));
        await confirmTriggerStepUp(req);
      }
      await call(policy.deletePolicy, { ...(await vaultFacts(params.vault_id)), policyId: params.policy_id });
      res.status(204).end();
    },
  );

  return router;
}
