import { isConsensus, matchApprovalPolicy } from '@custos/approval-rules';
import { type Principal, type UserPrincipal, requireHuman } from '@custos/auth';
import { writeEvent } from '@custos/events';
import {
  ConflictError,
  CustosError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  type Transaction,
  isUuid,
} from '@custos/service-kit';
import {
  consumedAudit,
  decidedAudit,
  executedAudit,
  expiredAudit,
  requestedAudit,
  writeApprovalsAudit,
} from '../audit/approvals-audit.js';
import { outbox } from '../db/schema.js';
import type { IdentityClient } from '../peers/identity-client.js';
import {
  MAX_JSON_BYTES,
  MAX_REASON_LENGTH,
  MAX_TARGET_ID_LENGTH,
  MAX_TARGET_TYPE_LENGTH,
  type Tally,
  checkDeclaredTier,
  checkJsonObject,
  checkRequestedAction,
  checkRequirement,
  checkRiskTier,
  checkSummary,
  decisionOf,
  enforcedTier,
  executorRefusal,
  factsOfRequest,
  optionalText,
  proofSatisfies,
  requireOpen,
  requirePending,
  requiredText,
  tally,
  voterRefusal,
} from './approval-fns.js';
import type { ApprovalStore } from './approval-store.js';
import {
  APPROVAL_STATUSES,
  type ApprovalRecord,
  type ApprovalStatus,
  type ApprovalSummary,
  type ConsumeInput,
  type CreateApprovalInput,
  type CredentialType,
  type RequestApprovalInput,
  type Requirement,
} from './approval-types.js';

/** The step-up purpose a `rat_` token for deciding an approval is bound to. */
export const DECIDE_PURPOSE = 'approval.decide';

/** The actions signer raises itself, and the targets they name. */
const PLATFORM_CREATED: Record<string, string> = {
  agent_transaction: 'transaction',
  agent_sign_intent: 'sign_intent',
};

/**
 * The approval of a human's guardrail edit (issue 20), raised through the gateway: its target type
 * and the change hash identity computed (hex SHA-256), and the tier its deciders step up at.
 */
export const POLICY_CHANGE_ACTION = 'policy_change';
export const POLICY_CHANGE_TARGET = 'agent_guardrails';
const CHANGE_HASH = /^[0-9a-f]{64}$/;
const POLICY_CHANGE_TIER = 2;
/** Who may raise and decide a policy_change approval. */
const POLICY_CHANGE_ROLES: readonly string[] = ['owner', 'admin'];

/** The longest an approval may stay open: 30 days. */
const MAX_EXPIRY_SECS = 30 * 86_400;

/** The problem of a use (a resume) that no approval covers (403 `approval_required`). */
export function approvalRequired(approvalId: string, detail: string): PermissionDeniedError {
  return new PermissionDeniedError(detail, {
    type: 'approval_required',
    extensions: isUuid(approvalId) ? { approval_request_id: approvalId.toLowerCase() } : {},
  });
}

/** The 401 challenge of a tier-2 or tier-3 decision sent without `X-Auth-Confirm`. */
function stepUpChallenge(tier: number): CustosError {
  return new CustosError('unauthenticated', {
    type: 'step_up_required',
    detail:
      tier >= 3
        ? `deciding a tier 3 approval needs a second factor: retry with X-Auth-Confirm carrying a current TOTP code`
        : `deciding a tier ${tier} approval needs a step-up: retry with X-Auth-Confirm carrying a rat_ token for purpose ${DECIDE_PURPOSE} (POST /v1/auth/reauth), your password, or a current TOTP code`,
    // `accepted`: what X-Auth-Confirm may carry at this tier, so a client asks for the right one.
    extensions: { purpose: DECIDE_PURPOSE, risk_tier: String(tier), accepted: acceptedProofs(tier) },
  });
}

/** The step-up methods a decision of `tier` accepts, comma-separated (the challenge's `accepted`). */
export function acceptedProofs(tier: number): string {
  return tier >= 3 ? 'totp' : 'reauth_token,password,totp';
}

/** The 403 of a tier-3 decision proved with something other than a TOTP code. */
function totpRequired(): PermissionDeniedError {
  return new PermissionDeniedError(
    'a tier 3 approval needs a second factor: X-Auth-Confirm must be a current TOTP code (a password or rat_ token is not enough)',
    {
      type: 'step_up_required',
      extensions: { purpose: DECIDE_PURPOSE, risk_tier: '3', accepted: acceptedProofs(3) },
    },
  );
}

/** The id of an approval named in a path: anything but a UUID names none (404). */
function approvalIdOf(raw: string): string {
  if (!isUuid(raw)) throw new NotFoundError('approval', raw);
  return raw.toLowerCase();
}

/**
 * The consensus requirement of the agent's matching rule at the enforced `tier`. The agent sent
 * none of it, so a requirement no vote could meet is not a 400 on its fields: when the agent's
 * declared tier is what makes it unmeetable (a tier 3 vote carries only TOTP) the declared tier is
 * at fault (400 `declared_risk_tier`); otherwise the stored policy is (422: an admin must fix it).
 */
function policyRequirement(r: Requirement, tier: number, ruleTier: number, ruleIndex: number): Requirement {
  try {
    return checkRequirement(r, tier);
  } catch (err) {
    if (!(err instanceof InvalidArgumentError)) throw err;
    if (tier > ruleTier) {
      try {
        checkRequirement(r, ruleTier);
      } catch {
        throw unusablePolicy(ruleIndex, err.detail);
      }
      throw new InvalidArgumentError(
        'declared_risk_tier',
        `declared_risk_tier ${tier} cannot be met by the consensus the agent's policy asks for (rule ${ruleIndex}): ${err.detail}`,
      );
    }
    throw unusablePolicy(ruleIndex, err.detail);
  }
}

function unusablePolicy(ruleIndex: number, why: string): CustosError {
  return new CustosError('unprocessable', {
    detail: `the agent's action_approval_policy rule ${ruleIndex} asks for a consensus no vote can meet (${why}); an admin of the org must correct the policy`,
  });
}

/** The data every approval event carries: ids, action, tier, kind, title and status, never the payload. */
function eventBasics(a: ApprovalRecord): Record<string, unknown> {
  return {
    approval_id: a.id,
    org_id: a.orgId,
    agent_id: a.agentId,
    action: a.action,
    target_type: a.targetType,
    target_id: a.targetId,
    risk_tier: a.riskTier,
    kind: a.kind,
    title: a.summary.title,
    status: a.status,
  };
}

/** The data of a `pending_approval.*` event. */
function pendingBasics(a: ApprovalRecord, t?: Tally): Record<string, unknown> {
  return {
    ...eventBasics(a),
    pending_approval_id: a.id,
    min_approvals: a.requirement?.minApprovals ?? 1,
    required_roles: a.requirement?.requiredRoles ?? [],
    ...(t ? { approvals: t.approvals, rejections: t.rejections } : {}),
  };
}

/** Settings of the approvals service. */
export interface ApprovalSettings {
  /** APPROVAL_TTL_SECONDS: how long an approval stays open when no rule says otherwise. */
  ttlSeconds: number;
}

/**
 * Approvals (SPEC §2.5, §3, §4.5, §8): an agent asks, the platform raises one for an agent's
 * transaction or sign intent, the org's humans decide with the proof the tier needs (one decision,
 * or one vote each for a consensus), a human of a required role executes an approved consensus,
 * and the approval is used once for the target it was raised for. Every change writes its events
 * and audit record in its own transaction; no peer is called inside one.
 */
export class ApprovalService {
  constructor(
    private readonly deps: {
      store: ApprovalStore;
      identity: Pick<IdentityClient, 'agentInOrg' | 'confirmStepUp'>;
      settings: ApprovalSettings;
    },
  ) {}

  /** `POST /v1/approvals/request`: an agent asks a human. */
  async request(p: Principal, input: RequestApprovalInput): Promise<ApprovalRecord> {
    if (p.kind !== 'agent')
      throw new PermissionDeniedError('only agents may request approvals; people decide them');
    const action = checkRequestedAction(input.action);
    const targetType = requiredText(input.targetType, 'target_type', MAX_TARGET_TYPE_LENGTH);
    const targetId = requiredText(input.targetId, 'target_id', MAX_TARGET_ID_LENGTH);
    const summary = checkSummary(input.summary);
    const payload = checkJsonObject(input.payload, 'payload');
    const reason = optionalText(input.reason, 'reason', MAX_REASON_LENGTH);
    const declared = checkDeclaredTier(input.declaredRiskTier);
    // The agent's policy and creator come from identity (never from the token alone: the policy
    // may have changed since the token was minted).
    const agent = await this.deps.identity.agentInOrg(p.orgId, p.agentId);
    const match = matchApprovalPolicy(agent.actionApprovalPolicy, factsOfRequest(action, payload));
    const tier = enforcedTier(declared, match?.tier);
    const requirement =
      match?.requirement && isConsensus(match.requirement)
        ? policyRequirement(match.requirement, tier, match.tier, match.ruleIndex)
        : null;
    return this.store(
      {
        orgId: p.orgId,
        agentId: p.agentId,
        userId: isUuid(agent.createdBy) ? agent.createdBy.toLowerCase() : null,
        action,
        targetType,
        targetId,
        summary,
        payload,
        reason,
        declaredRiskTier: declared,
        riskTier: tier,
        kind: requirement ? 'consensus' : 'single',
        requirement,
        preview: null,
        rule: match?.ruleJson ?? null,
        ttlSeconds: match?.expirySecs ?? this.deps.settings.ttlSeconds,
      },
      false,
    );
  }

  /** A platform-created approval (signer): a transaction or sign intent waiting for a human. */
  async create(c: CreateApprovalInput): Promise<ApprovalRecord> {
    if (!isUuid(c.orgId)) throw new InvalidArgumentError('org_id', 'org_id must be a UUID');
    if (!isUuid(c.agentId)) throw new InvalidArgumentError('agent_id', 'agent_id must be a UUID');
    const target = PLATFORM_CREATED[c.action];
    if (!target)
      throw new InvalidArgumentError('action', 'action must be agent_transaction or agent_sign_intent');
    if (c.targetType !== target)
      throw new InvalidArgumentError('target_type', `the target of ${c.action} is a ${target}`);
    const targetId = requiredText(c.targetId, 'target_id', MAX_TARGET_ID_LENGTH);
    const tier = checkRiskTier(c.riskTier);
    if (!Number.isInteger(c.expirySecs) || c.expirySecs < 0 || c.expirySecs > MAX_EXPIRY_SECS)
      throw new InvalidArgumentError('expiry_secs', `expiry_secs must be from 0 to ${MAX_EXPIRY_SECS}`);
    const requirement =
      c.requirement && isConsensus(c.requirement) ? checkRequirement(c.requirement, tier) : null;
    const fallbackTitle = c.action === 'agent_transaction' ? 'Agent transaction' : 'Agent sign intent';
    // The agent's own words when it gave a title; a neutral title otherwise.
    const summary: ApprovalSummary = checkSummary(
      c.summary && c.summary.title.trim() !== ''
        ? c.summary
        : { title: fallbackTitle, body: c.summary?.body ?? '', fields: c.summary?.fields ?? [] },
    );
    const preview = c.preview ?? null;
    if (preview && Buffer.byteLength(JSON.stringify(preview)) > 4 * MAX_JSON_BYTES)
      throw new InvalidArgumentError(
        'preview',
        `preview must be at most ${4 * MAX_JSON_BYTES} bytes of JSON`,
      );
    return this.store(
      {
        orgId: c.orgId.toLowerCase(),
        agentId: c.agentId.toLowerCase(),
        userId: isUuid(c.agentCreatedBy) ? c.agentCreatedBy.toLowerCase() : null,
        action: c.action,
        targetType: c.targetType,
        targetId,
        summary,
        payload: checkJsonObject(c.payload, 'payload'),
        reason: null,
        declaredRiskTier: null,
        riskTier: tier,
        kind: requirement ? 'consensus' : 'single',
        requirement,
        preview,
        rule: checkJsonObject(c.rule, 'rule'),
        ttlSeconds: c.expirySecs > 0 ? c.expirySecs : this.deps.settings.ttlSeconds,
      },
      true,
    );
  }

  /**
   * A human's widening guardrail edit waiting for another owner or admin (the gateway raises it
   * when identity holds the edit): the org and the requester are the caller's, the agent must be
   * in that org, the target is the change hash identity computed; single, tier 2 (deciding needs a
   * step-up); the requester may not decide it (decide()).
   */
  async createPolicyChange(
    p: Principal,
    c: Pick<
      CreateApprovalInput,
      'agentId' | 'targetType' | 'targetId' | 'summary' | 'preview' | 'expirySecs'
    >,
  ): Promise<ApprovalRecord> {
    requireHuman(p, 'raise guardrail change approvals');
    if (!POLICY_CHANGE_ROLES.includes(p.role))
      throw new PermissionDeniedError('only owners and admins may change guardrails');
    if (!isUuid(c.agentId)) throw new InvalidArgumentError('agent_id', 'agent_id must be a UUID');
    if (c.targetType !== POLICY_CHANGE_TARGET)
      throw new InvalidArgumentError(
        'target_type',
        `the target of ${POLICY_CHANGE_ACTION} is ${POLICY_CHANGE_TARGET}`,
      );
    if (!CHANGE_HASH.test(c.targetId))
      throw new InvalidArgumentError(
        'target_id',
        'target_id must be the change hash (64 lower-case hex digits)',
      );
    if (!Number.isInteger(c.expirySecs) || c.expirySecs < 0 || c.expirySecs > MAX_EXPIRY_SECS)
      throw new InvalidArgumentError('expiry_secs', `expiry_secs must be from 0 to ${MAX_EXPIRY_SECS}`);
    // NOT_FOUND unless the agent is in the caller's org.
    const agent = await this.deps.identity.agentInOrg(p.orgId, c.agentId.toLowerCase());
    const summary = checkSummary(
      c.summary && c.summary.title.trim() !== ''
        ? c.summary
        : {
            title: `Guardrail change of agent ${agent.name}`,
            body: c.summary?.body ?? '',
            fields: c.summary?.fields ?? [],
          },
    );
    const preview = c.preview ?? null;
    if (preview && Buffer.byteLength(JSON.stringify(preview)) > 4 * MAX_JSON_BYTES)
      throw new InvalidArgumentError(
        'preview',
        `preview must be at most ${4 * MAX_JSON_BYTES} bytes of JSON`,
      );
    return this.store(
      {
        orgId: p.orgId,
        agentId: agent.id.toLowerCase(),
        // The requester: the one human who may not decide it.
        userId: p.userId,
        action: POLICY_CHANGE_ACTION,
        targetType: POLICY_CHANGE_TARGET,
        targetId: c.targetId,
        summary,
        payload: null,
        reason: null,
        declaredRiskTier: null,
        riskTier: POLICY_CHANGE_TIER,
        kind: 'single',
        requirement: null,
        preview,
        rule: null,
        ttlSeconds: c.expirySecs > 0 ? c.expirySecs : this.deps.settings.ttlSeconds,
      },
      true,
    );
  }

  private async store(
    n: Parameters<ApprovalStore['insert']>[0],
    platformCreated: boolean,
  ): Promise<ApprovalRecord> {
    return this.deps.store.transaction(async (tx) => {
      const a = await this.deps.store.insert(n, tx);
      await writeEvent(tx, outbox, {
        name: 'approval.created',
        orgId: a.orgId,
        data: { ...eventBasics(a), expires_at: a.expiresAt.toISOString() },
      });
      if (a.kind === 'consensus') {
        await writeEvent(tx, outbox, {
          name: 'pending_approval.created',
          orgId: a.orgId,
          data: { ...pendingBasics(a), expires_at: a.expiresAt.toISOString() },
        });
      }
      await writeApprovalsAudit(tx, requestedAudit(a, platformCreated));
      return a;
    });
  }

  /** One approval: for the agent it concerns and the humans of its org; anyone else 404. */
  async get(p: Principal, rawId: string): Promise<ApprovalRecord> {
    const id = approvalIdOf(rawId);
    const a = await this.deps.store.get(p.orgId, id);
    if (!a || (p.kind === 'agent' && a.agentId !== p.agentId)) throw new NotFoundError('approval', rawId);
    return a;
  }

  /** The org's approvals (humans only), pending first, newest first. */
  async list(
    p: Principal,
    filter: { status: string; agentId: string; limit: number },
  ): Promise<ApprovalRecord[]> {
    requireHuman(p, 'list approvals');
    if (filter.status !== '' && !(APPROVAL_STATUSES as readonly string[]).includes(filter.status))
      throw new InvalidArgumentError('status', `status must be one of ${APPROVAL_STATUSES.join(', ')}`);
    if (filter.agentId !== '' && !isUuid(filter.agentId))
      throw new InvalidArgumentError('agent_id', 'agent_id must be a UUID');
    if (!Number.isInteger(filter.limit) || filter.limit < 0 || filter.limit > 500)
      throw new InvalidArgumentError('limit', 'limit must be from 1 to 500');
    return this.deps.store.list(p.orgId, {
      ...(filter.status ? { status: filter.status as ApprovalStatus } : {}),
      ...(filter.agentId ? { agentId: filter.agentId.toLowerCase() } : {}),
      limit: filter.limit === 0 ? 100 : filter.limit,
    });
  }

  /**
   * The proof a decision of `tier` needs (the `X-Auth-Confirm` value, '' when absent), checked by
   * identity: the credential type to record.
   */
  private async prove(user: UserPrincipal, tier: number, credential: string): Promise<CredentialType> {
    if (credential === '') {
      if (tier <= 1) return 'session';
      throw stepUpChallenge(tier);
    }
    // Refused before identity sees it: a re-auth token would be spent for nothing.
    if (tier >= 3 && credential.startsWith('rat_')) throw totpRequired();
    const method = await this.deps.identity.confirmStepUp(user, DECIDE_PURPOSE, credential);
    if (!proofSatisfies(tier, method)) throw totpRequired();
    return method;
  }

  /**
   * A human approves or rejects. A single approval is settled by this decision; a consensus one
   * records this human's vote and is settled when the votes reach the requirement (or on the first
   * reject). The vote, the tally and the change of status happen under a lock of the approval.
   */
  async decide(
    p: Principal,
    rawId: string,
    input: { decision: string; reason: string; credential: string },
  ): Promise<ApprovalRecord> {
    requireHuman(p, 'decide approvals');
    const user = p;
    const decision = decisionOf(input.decision);
    const reason = optionalText(input.reason, 'reason', MAX_REASON_LENGTH);
    const id = approvalIdOf(rawId);
    const before = await this.deps.store.get(user.orgId, id);
    if (!before) throw new NotFoundError('approval', rawId);
    // Status only: expiry is the database clock's to judge, under the lock below.
    requirePending(before);
    if (before.action === POLICY_CHANGE_ACTION) {
      const refusal = policyChangeDeciderRefusal(user, before.userId);
      if (refusal) throw new PermissionDeniedError(refusal);
    }
    if (before.kind === 'consensus') {
      const refusal = voterRefusal(before.requirement!, user, before.userId);
      if (refusal) throw new PermissionDeniedError(refusal);
      if (before.votes.some((v) => v.userId === user.userId))
        throw new ConflictError('you have already voted on this approval');
    }
    const credentialType = await this.prove(user, before.riskTier, input.credential);
    return this.deps.store.transaction(async (tx) => {
      const row = await this.deps.store.lock(user.orgId, id, tx);
      if (!row) throw new NotFoundError('approval', rawId);
      // The database's clock decides whether it is still open (a vote that does not settle the
      // consensus has no other expiry check).
      const locked = row.approval;
      requireOpen(locked, row.unexpired);
      const settled =
        locked.kind === 'single'
          ? await this.settleSingle(tx, user, locked, decision, reason, credentialType)
          : await this.vote(tx, user, locked, decision, reason, credentialType);
      return settled;
    });
  }

  private async settleSingle(
    tx: Transaction,
    user: UserPrincipal,
    a: ApprovalRecord,
    decision: 'approved' | 'rejected',
    reason: string | null,
    credentialType: CredentialType,
  ): Promise<ApprovalRecord> {
    const settled = await this.deps.store.settle(
      a.id,
      { status: decision, decidedBy: user.userId, reason, credentialType },
      tx,
    );
    if (!settled) throw new ConflictError('the approval was decided or expired meanwhile');
    await writeEvent(tx, outbox, {
      name: 'approval.decided',
      orgId: settled.orgId,
      data: { ...eventBasics(settled), decision, decided_by: user.userId },
    });
    await writeApprovalsAudit(tx, decidedAudit(user, settled, { decision, credentialType }));
    return settled;
  }

  private async vote(
    tx: Transaction,
    user: UserPrincipal,
    a: ApprovalRecord,
    decision: 'approved' | 'rejected',
    reason: string | null,
    credentialType: CredentialType,
  ): Promise<ApprovalRecord> {
    const requirement: Requirement = a.requirement!;
    const added = await this.deps.store.addVote(
      { approvalId: a.id, userId: user.userId, role: user.role, decision, credentialType, reason },
      tx,
    );
    if (!added) throw new ConflictError('you have already voted on this approval');
    const votes = await this.deps.store.votes(a.id, tx);
    const t = tally(votes, requirement);
    let after: ApprovalRecord = { ...a, votes };
    if (t.status !== 'pending') {
      const settled = await this.deps.store.settle(
        a.id,
        { status: t.status, decidedBy: user.userId, reason, credentialType },
        tx,
      );
      if (!settled) throw new ConflictError('the approval was decided or expired meanwhile');
      after = settled;
    }
    await writeEvent(tx, outbox, {
      name: 'approval.decided',
      orgId: after.orgId,
      data: {
        ...eventBasics(after),
        decision,
        decided_by: user.userId,
        approvals: t.approvals,
        rejections: t.rejections,
      },
    });
    if (after.status === 'approved') {
      await writeEvent(tx, outbox, {
        name: 'pending_approval.approved',
        orgId: after.orgId,
        data: pendingBasics(after, t),
      });
    } else if (after.status === 'rejected') {
      await writeEvent(tx, outbox, {
        name: 'pending_approval.rejected',
        orgId: after.orgId,
        data: pendingBasics(after, t),
      });
    }
    await writeApprovalsAudit(tx, decidedAudit(user, after, { decision, credentialType, tally: t }));
    return after;
  }

  /**
   * A human of a required role executes an approved consensus approval: it becomes `executed`,
   * usable once by the resume it was raised for.
   */
  async execute(p: Principal, rawId: string): Promise<ApprovalRecord> {
    requireHuman(p, 'execute approvals');
    const user = p;
    const id = approvalIdOf(rawId);
    const before = await this.deps.store.get(user.orgId, id);
    if (!before) throw new NotFoundError('approval', rawId);
    if (before.kind !== 'consensus')
      throw new ConflictError(
        'only consensus approvals are executed; this one is used as it is once approved',
      );
    const refusal = executorRefusal(before.requirement!, user, before.userId);
    if (refusal) throw new PermissionDeniedError(refusal);
    if (before.status !== 'approved')
      throw new ConflictError(`the approval is ${before.status} and cannot be executed`);
    return this.deps.store.transaction(async (tx) => {
      const executed = await this.deps.store.execute(user.orgId, id, user.userId, tx);
      if (!executed) throw new ConflictError('the approval was executed or expired meanwhile');
      await writeEvent(tx, outbox, {
        name: 'pending_approval.executed',
        orgId: executed.orgId,
        data: {
          ...pendingBasics(executed),
          executed_by: user.userId,
          executed_at: executed.executedAt?.toISOString() ?? null,
        },
      });
      await writeApprovalsAudit(tx, executedAudit(user, executed));
      return executed;
    });
  }

  /**
   * Uses an approval once for the target it was raised for (signer's resume): one conditional
   * update; anything that does not hold is 403 `approval_required` and changes nothing.
   */
  /**
   * The gateway's use of a policy_change approval (a guardrail edit resubmitted with its
   * approval_id): consume() in the caller's org, for that action only.
   */
  async consumePolicyChange(p: Principal, c: Omit<ConsumeInput, 'orgId'>): Promise<ApprovalRecord> {
    requireHuman(p, 'change guardrails');
    if (c.action !== POLICY_CHANGE_ACTION || c.targetType !== POLICY_CHANGE_TARGET)
      throw approvalRequired(c.approvalId, `only ${POLICY_CHANGE_ACTION} approvals are used here`);
    return this.consume({ ...c, orgId: p.orgId });
  }

  async consume(c: ConsumeInput): Promise<ApprovalRecord> {
    const refused = () =>
      approvalRequired(
        c.approvalId,
        'this action needs an approval that a human approved for it (executed, when a consensus), for this agent and target, unused and unexpired',
      );
    if (!isUuid(c.approvalId) || !isUuid(c.orgId) || !isUuid(c.agentId)) throw refused();
    return this.deps.store.transaction(async (tx) => {
      const used = await this.deps.store.consume(
        {
          ...c,
          approvalId: c.approvalId.toLowerCase(),
          orgId: c.orgId.toLowerCase(),
          agentId: c.agentId.toLowerCase(),
        },
        tx,
      );
      if (!used) throw refused();
      await writeApprovalsAudit(tx, consumedAudit(used));
      return used;
    });
  }

  /**
   * Ends up to `batch` open approvals past their expiry (pending, approved or executed but unused),
   * with their records; answers how many it ended. Safe on several replicas at once.
   */
  async sweep(batch: number): Promise<number> {
    return this.deps.store.transaction(async (tx) => {
      const expired = await this.deps.store.expireDue(batch, tx);
      for (const { approval: a, statusBefore } of expired) {
        if (a.kind === 'consensus') {
          await writeEvent(tx, outbox, {
            name: 'pending_approval.expired',
            orgId: a.orgId,
            data: { ...pendingBasics(a), expires_at: a.expiresAt.toISOString() },
          });
        }
        await writeApprovalsAudit(tx, expiredAudit(a, statusBefore));
      }
      return expired.length;
    });
  }
}

/**
 * Why a human may not decide a policy_change approval, or undefined: only owners and admins decide
 * guardrail changes, and never the human who asked for the change (self-approval).
 */
export function policyChangeDeciderRefusal(
  decider: { userId: string; role: string },
  requester: string | null,
): string | undefined {
  if (!POLICY_CHANGE_ROLES.includes(decider.role))
    return 'only owners and admins may decide guardrail changes';
  if (requester !== null && decider.userId === requester)
    return 'the human who asked for a guardrail change may not approve it (self-approval is not allowed)';
  return undefined;
}
