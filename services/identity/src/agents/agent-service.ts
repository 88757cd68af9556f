import { type OrgAdmin, type Principal, requireHuman, requireHumanAdmin } from '@custos/auth';
import { auditOf } from '@custos/events';
import {
  CustosError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  ResourceLimitExceededError,
  type Transaction,
  UnauthenticatedError,
  isUuid,
  lockOrgResource,
} from '@custos/service-kit';
import { SECRET_TOKEN_PREFIXES, generateSecretToken } from '../credentials/secret-token-fns.js';
import { msUntilPastRevocation } from '../account/account-fns.js';
import { audit } from '../audit/identity-audit.js';
import type { BillingClient } from '../peers/billing-client.js';
import type { Revocation, RevocationStore } from '../tokens/revocation-store.js';
import { agentInOrg } from './agent-access.js';
import {
  DEFAULT_AGENT_SETTINGS,
  changedFieldNames,
  checkAgentChange,
  narrowsTokenClaims,
  touchesGuardrails,
} from './agent-fns.js';
import { AGENT_GUARDRAILS_EDIT_PURPOSE, AGENT_KEY_ROTATE_PURPOSE } from '../account/account-fns.js';
import type { StepUpChecker } from '../mfa/mfa-types.js';
import type { AgentStore } from './agent-store.js';
import type { Agent, AgentChange } from './agent-types.js';
import {
  type GuardrailChange,
  compareAgentGuardrails,
  guardrailChangeHash,
  guardrailJson,
  needsApproval,
} from './guardrail-change-fns.js';
import type { GuardrailRevision, GuardrailRevisionStore } from './guardrail-revision-store.js';

/** What an edit of guardrail fields does: the answer of a dry run, a held edit and an applied one. */
export interface GuardrailChangeView {
  change: GuardrailChange;
  changeHash: string;
  before: Record<string, unknown>;
  after: Record<string, unknown>;
  approvalRequired: boolean;
}

/** How an update is made: checked only, or applied through an approval the gateway consumed. */
export interface UpdateOptions {
  dryRun?: boolean;
  /** The consumed approval (UUID) and the change hash it was bound to. */
  approval?: { id: string; changeHash: string };
}

/** The answer of an update. */
export interface UpdateResult {
  agent: Agent;
  /** Set when the change touches guardrail fields. */
  guardrailChange?: GuardrailChangeView;
  /** False for a dry run and for an edit that waits for an approval. */
  applied: boolean;
  revisionId?: string;
}

/** Where the guardrail revisions live and whether widening edits wait for an approval. */
export interface GuardrailEditRules {
  revisions: GuardrailRevisionStore;
  /** The setting `guardrail_changes_require_approval` is "true". */
  changesRequireApproval(): Promise<boolean>;
}

const KEY_PREFIX = SECRET_TOKEN_PREFIXES.agentApiKey;
/** Agent tokens live at most a day, so a subject revocation needs to outlive them by that much. */
const MAX_AGENT_TOKEN_MS = 86_400_000;

function manager(p: Principal): OrgAdmin {
  requireHumanAdmin(p, 'manage agents');
  return p;
}

/** Registration, settings, deactivation and key rotation of agents (spec §4.4). */
export class AgentService {
  constructor(
    private readonly store: AgentStore,
    private readonly revocations: Pick<RevocationStore, 'revokeSession' | 'record' | 'publish'>,
    private readonly billing: Pick<BillingClient, 'agentCap'>,
    private readonly stepUp: StepUpChecker,
    private readonly guardrails: GuardrailEditRules,
  ) {}

  /** Registers an agent in the caller's org; the API key is returned once. */
  async create(p: Principal, change: AgentChange): Promise<{ agent: Agent; apiKey: string }> {
    const user = manager(p);
    const input = checkAgentChange(change, 'create');
    const key = generateSecretToken(KEY_PREFIX);
    const cap = await this.billing.agentCap(user.orgId);
    const agent = await this.store.transaction(async (tx) => {
      await this.reserveActiveAgent(tx, user.orgId, cap);
      const created = await this.store.insert(
        {
          orgId: user.orgId,
          name: input.name!,
          description: input.description ?? '',
          settings: { ...DEFAULT_AGENT_SETTINGS, ...input.settings },
          createdBy: user.userId,
        },
        tx,
      );
      await this.store.insertKey({ id: key.id, agentId: created.id, secretHash: key.secretHash }, tx);
      await audit(
        tx,
        auditOf(
          user,
          'agent.created',
          { type: 'agent', id: created.id },
          { fields: changedFieldNames(input) },
        ),
      );
      return created;
    });
    return { agent, apiKey: key.token };
  }

  /** The agents of the caller's org. */
  async list(p: Principal): Promise<Agent[]> {
    requireHuman(p, 'list agents');
    return this.store.listInOrg(p.orgId);
  }

  /** One agent of the caller's org; an agent may read only itself. */
  async get(p: Principal, agentId: string): Promise<Agent> {
    if (p.kind === 'agent' && p.agentId !== agentId.toLowerCase()) throw new NotFoundError('agent', agentId);
    return agentInOrg(this.store, p, agentId);
  }

  /**
   * An agent of an org another service names after verifying its caller's token itself (signer):
   * 404 when the agent is not in that org, 400 naming `org_id` or `agent_id` when malformed.
   */
  async getInOrg(orgId: string, agentId: string): Promise<Agent> {
    if (!isUuid(orgId)) throw new InvalidArgumentError('org_id', 'org_id must be a UUID');
    return agentInOrg(this.store, { orgId: orgId.toLowerCase() }, agentId);
  }

  /**
   * Changes the fields present. A change that widens applies to tokens minted next; one that may
   * narrow what live tokens carry (narrowsTokenClaims) revokes every token of the agent at once,
   * before the answer, so the agent exchanges its key again for a token with the new claims.
   */
  async update(p: Principal, agentId: string, change: AgentChange, credential: unknown): Promise<Agent> {
    return (await this.edit(p, agentId, change, credential)).agent;
  }

  /**
   * update(), with the guardrail rules of issue 20: an edit that touches guardrail fields writes a
   * revision in its transaction; when `guardrail_changes_require_approval` is "true" and the edit
   * widens (or is mixed) it is held (applied: false, nothing written) for the gateway to raise an
   * approval; `options.approval` (an approval the gateway consumed for this change's hash) applies
   * it, when the hash computed under the row lock is still the one approved (409
   * `guardrail_change_stale` otherwise). `options.dryRun` answers what the edit would do.
   */
  async edit(
    p: Principal,
    agentId: string,
    change: AgentChange,
    credential: unknown,
    options: UpdateOptions = {},
  ): Promise<UpdateResult> {
    const user = manager(p);
    const agent = await agentInOrg(this.store, p, agentId);
    const input = checkAgentChange(change, 'update');
    const guardrailEdit = touchesGuardrails(input.settings);
    const approval = options.approval;
    if (approval) {
      if (!guardrailEdit)
        throw new InvalidArgumentError(
          'approval_id',
          'approval_id applies only to an edit of guardrail fields',
        );
      if (!isUuid(approval.id)) throw new InvalidArgumentError('approval_id', 'approval_id must be a UUID');
      if (options.dryRun) throw new InvalidArgumentError('dry_run', 'a dry run takes no approval');
    }
    // SPEC.md §5.9: every guardrail edit needs a step-up; other fields do not. An edit through a
    // consumed approval was stepped up in the gateway's dry run of the same request, before the
    // approval was consumed (so a wrong credential does not spend the approval).
    if (guardrailEdit && !approval)
      await this.stepUp.confirmStepUp(user, AGENT_GUARDRAILS_EDIT_PURPOSE, credential);
    const gated = guardrailEdit && !approval && (await this.guardrails.changesRequireApproval());
    // Reactivating takes a place under the org's cap on active agents, like creating does: asked
    // whenever the change sets it active, since whether it is inactive is read under the lock.
    const cap = input.isActive === true ? await this.billing.agentCap(agent.orgId) : undefined;
    const target = { type: 'agent', id: agent.id };
    const { updated, revoked, narrowing, held, view, revision } = await this.store.transaction(async (tx) => {
      // Lock order, as everywhere: the org's agents lock, then the agent's row.
      if (cap && cap.maxAgents >= 0) await lockOrgResource(tx, agent.orgId, 'agents');
      // Compared with the agent as it is now, under the row's lock: an edit racing this one cannot
      // make a narrowing look like none, nor a reactivation skip the cap.
      const current = (await this.store.findByIdForUpdate(agent.id, tx)) ?? agent;
      const reactivating = input.isActive === true && !current.isActive;
      const deactivating = input.isActive === false && current.isActive;
      if (reactivating && cap && cap.maxAgents >= 0) {
        if ((await this.store.countActive(agent.orgId, tx)) >= cap.maxAgents)
          throw new ResourceLimitExceededError('agents', cap.maxAgents, cap.plan);
      }
      const settings = { ...current.settings, ...input.settings };
      let view: GuardrailChangeView | undefined;
      if (guardrailEdit) {
        const before = guardrailJson(current.settings);
        const after = guardrailJson(settings);
        const moved = compareAgentGuardrails(current.settings, settings);
        view = {
          change: moved,
          changeHash: guardrailChangeHash(agent.id, before, after),
          before,
          after,
          approvalRequired: gated && needsApproval(moved),
        };
      }
      // Nothing is written: a dry run, or an edit that waits for an approval.
      if (options.dryRun || view?.approvalRequired)
        return { updated: current, revoked: [], narrowing: undefined, held: true, view, revision: undefined };
      if (approval && view!.changeHash !== approval.changeHash.toLowerCase())
        throw new CustosError('conflict', {
          type: 'guardrail_change_stale',
          field: 'approval_id',
          detail:
            "the agent's guardrails changed since this approval was raised: the approved change no longer applies; nothing was changed",
        });
      const narrowing = narrowsTokenClaims(current.settings, settings);
      const next = await this.store.update(
        agent.id,
        {
          ...(input.name !== undefined ? { name: input.name } : {}),
          ...(input.description !== undefined ? { description: input.description } : {}),
          ...(input.isActive !== undefined ? { isActive: input.isActive } : {}),
          settings,
        },
        tx,
      );
      // Field names only: values (scopes, vaults, limits) are in the agent itself.
      await audit(
        tx,
        auditOf(user, 'agent.updated', target, {
          fields: changedFieldNames(input),
          ...(narrowing ? { tokens_revoked: true } : {}),
        }),
      );
      if (reactivating) await audit(tx, auditOf(user, 'agent.activated', target));
      let revision: GuardrailRevision | undefined;
      if (view) {
        revision = await this.guardrails.revisions.insert(
          {
            orgId: agent.orgId,
            agentId: agent.id,
            actorId: user.userId,
            change: view.change,
            before: view.before,
            after: view.after,
            approvalId: approval ? approval.id.toLowerCase() : null,
          },
          tx,
        );
        await audit(
          tx,
          auditOf(user, 'agent.guardrails_revised', target, {
            revision_id: revision.id,
            change: view.change,
            ...(approval ? { approval_id: approval.id.toLowerCase() } : {}),
          }),
        );
      }
      if (!deactivating) {
        // Stored with the change it belongs to: a narrowing never commits without its revocation.
        const revocation = narrowing ? agentRevocation(agent.id) : undefined;
        if (revocation) await this.revocations.record([revocation], tx);
        return { updated: next, revoked: [], narrowing: revocation, held: false, view, revision };
      }
      // Deactivating through PATCH is the same as DELETE: keys and tokens stop at once.
      const keyIds = await this.store.revokeKeys(agent.id, tx);
      await audit(tx, auditOf(user, 'agent.deactivated', target, { via: 'update' }));
      return { updated: next, revoked: keyIds, narrowing: undefined, held: false, view, revision };
    });
    if (held) return { agent: updated, ...(view ? { guardrailChange: view } : {}), applied: false };
    await this.revokeTokensOf(revoked);
    if (narrowing) {
      // Stamped again now that the change is visible: a token minted from the old settings between
      // the first stamp and the commit is covered too.
      const fresh = { ...narrowing, notBefore: new Date() };
      await this.revocations.record([fresh]);
      await this.revocations.publish([fresh]);
      const wait = msUntilPastRevocation(fresh.notBefore.getTime(), Date.now());
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
    return {
      agent: updated,
      ...(view ? { guardrailChange: view } : {}),
      applied: true,
      ...(revision ? { revisionId: revision.id } : {}),
    };
  }

  /** The org's guardrail revisions (owners and admins), newest first; of one agent when named. */
  async revisions(p: Principal, filter: { agentId: string; limit: number }): Promise<GuardrailRevision[]> {
    const user = manager(p);
    if (filter.agentId !== '' && !isUuid(filter.agentId))
      throw new InvalidArgumentError('agent_id', 'agent_id must be a UUID');
    if (!Number.isInteger(filter.limit) || filter.limit < 0 || filter.limit > 500)
      throw new InvalidArgumentError('limit', 'limit must be from 1 to 500');
    return this.guardrails.revisions.list(user.orgId, {
      ...(filter.agentId ? { agentId: filter.agentId.toLowerCase() } : {}),
      limit: filter.limit === 0 ? 100 : filter.limit,
    });
  }

  /** Deactivates an agent: its keys and every token it holds stop working at once. */
  async deactivate(p: Principal, agentId: string): Promise<void> {
    const user = manager(p);
    const agent = await agentInOrg(this.store, p, agentId);
    const revoked = await this.store.transaction(async (tx) => {
      await this.store.update(agent.id, { isActive: false }, tx);
      const keyIds = await this.store.revokeKeys(agent.id, tx);
      await audit(
        tx,
        auditOf(
          user,
          'agent.deactivated',
          { type: 'agent', id: agent.id },
          { via: 'delete', was_active: agent.isActive },
        ),
      );
      return keyIds;
    });
    await this.revokeTokensOf(revoked);
  }

  /** The calling agent's own record. */
  async self(p: Principal): Promise<Agent> {
    if (p.kind !== 'agent') throw new PermissionDeniedError('this endpoint is for agents');
    const agent = await this.store.findById(p.agentId);
    if (!agent?.isActive) throw new UnauthenticatedError();
    return agent;
  }

  /** Issues a new key; the previous key and the tokens minted from it stop working. */
  async rotateKey(p: Principal, agentId: string, credential: unknown): Promise<string> {
    const user = manager(p);
    const agent = await agentInOrg(this.store, p, agentId);
    await this.stepUp.confirmStepUp(user, AGENT_KEY_ROTATE_PURPOSE, credential);
    const key = generateSecretToken(KEY_PREFIX);
    const revoked = await this.store.transaction(async (tx) => {
      const ids = await this.store.revokeKeys(agent.id, tx);
      await this.store.insertKey({ id: key.id, agentId: agent.id, secretHash: key.secretHash }, tx);
      await audit(
        tx,
        auditOf(user, 'agent.key_rotated', { type: 'agent', id: agent.id }, { revoked_keys: ids.length }),
      );
      return ids;
    });
    await this.revokeTokensOf(revoked);
    return key.token;
  }

  /**
   * Makes room for one more active agent in `tx`, or throws 403 `resource_limit_exceeded`: the cap
   * is read first, then counted under the org's agent lock so that parallel creates queue.
   */
  private async reserveActiveAgent(
    tx: Transaction,
    orgId: string,
    cap: { maxAgents: number; plan: string },
  ): Promise<void> {
    if (cap.maxAgents < 0) return;
    await lockOrgResource(tx, orgId, 'agents');
    if ((await this.store.countActive(orgId, tx)) >= cap.maxAgents) {
      throw new ResourceLimitExceededError('agents', cap.maxAgents, cap.plan);
    }
  }

  /** Agent tokens carry the id of the key they were exchanged for (`sid`): revoking it ends them. */
  private async revokeTokensOf(keyIds: string[]): Promise<void> {
    const until = new Date(Date.now() + MAX_AGENT_TOKEN_MS);
    for (const id of keyIds) await this.revocations.revokeSession(id, until);
  }
}

/** The revocation of every token of an agent issued until now (a narrowing of what they carry). */
function agentRevocation(agentId: string): Revocation {
  const now = Date.now();
  return {
    kind: 'sub',
    value: `agent:${agentId}`,
    notBefore: new Date(now),
    expiresAt: new Date(now + MAX_AGENT_TOKEN_MS),
  };
}
