import type { RuleMatch } from '@custos/approval-rules';
import type { Approval, Requirement, Summary } from '@custos/proto/custos/approvals/v1/messages';
import {
  CustosError,
  InvalidArgumentError,
  type Logger,
  UnavailableError,
  describeError,
  isUuid,
} from '@custos/service-kit';
import type { IntentScope } from '../intents/intent-context.js';
import { type Approvals, approvalRequired } from '../peers/approvals-client.js';
import { type PreviewRpc, type PreviewSummary, buildPreview } from '../preview/index.js';
import { type BalanceChange, capBalanceChanges } from '../preview/preview-fns.js';
import type { TxRecord } from '../transactions/tx-types.js';

/** The chain access of previews (PreviewRpcPool); absent: previews without simulation. */
export interface PreviewChains {
  forChain(chain: { name: string; rpcUrl: string; chainId: bigint }): PreviewRpc;
}

/** What the approver's preview of a held transaction is computed from. */
export interface HeldTx {
  from: string;
  to: string;
  valueWei: bigint;
  data: string;
  /** A non-EVM token transfer's token (valueWei is then 0). */
  token?: { mint: string; amountRaw?: bigint | undefined; decimals?: number | undefined };
}

function requirementOf(m: RuleMatch): Requirement | undefined {
  const r = m.requirement;
  if (!r) return undefined;
  return {
    minApprovals: r.minApprovals,
    requiredRoles: r.requiredRoles,
    perRoleMinimums: r.perRoleMinimums,
    requireCredentialTypes: r.requireCredentialTypes,
    selfApprovalAllowed: r.selfApprovalAllowed,
  };
}

const previewSummary = (s: Summary | undefined): PreviewSummary | undefined =>
  s
    ? { title: s.title, body: s.body, fields: s.fields.map((f) => ({ label: f.label, value: f.value })) }
    : undefined;

/**
 * The most a preview's JSON may take (approvals refuses more than 256 KiB): its texts are already
 * bounded (2 KiB each) and its balance changes to 100; past this, the agent's summary and the rule
 * (which approvals stores on the approval itself) are left out, then the simulation's detail, then
 * the call's arguments, and as a last resort the largest remaining fields (named in `left_out`).
 */
export const PREVIEW_JSON_MAX = 64 * 1024;

const jsonBytes = (v: unknown): number => Buffer.byteLength(JSON.stringify(v) ?? '', 'utf8');
const fits = (p: Record<string, unknown>) => jsonBytes(p) <= PREVIEW_JSON_MAX;
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The simulation with at most BALANCE_CHANGES_MAX balance changes (the sender's, then the largest). */
function capSimulation(p: Record<string, unknown>): Record<string, unknown> {
  const sim = p['simulation'];
  if (!isObject(sim) || !Array.isArray(sim['balance_changes'])) return p;
  const changes = sim['balance_changes'] as BalanceChange[];
  const from = typeof p['from'] === 'string' ? p['from'] : '';
  const { kept, leftOut } = capBalanceChanges(changes, from);
  if (leftOut === 0) return p;
  const before = typeof sim['balance_changes_left_out'] === 'number' ? sim['balance_changes_left_out'] : 0;
  return { ...p, simulation: { ...sim, balance_changes: kept, balance_changes_left_out: before + leftOut } };
}

export function boundPreview(input: Record<string, unknown>): Record<string, unknown> {
  const p = capSimulation(input);
  if (fits(p)) return p;
  let out: Record<string, unknown> = { ...p, summary: null, rule: null, trimmed: true };
  if (fits(out)) return out;
  // Still too big: the simulation keeps only its outcome.
  const sim = out['simulation'];
  if (isObject(sim)) {
    const changes = Array.isArray(sim['balance_changes']) ? sim['balance_changes'].length : 0;
    const leftOut =
      (typeof sim['balance_changes_left_out'] === 'number' ? sim['balance_changes_left_out'] : 0) + changes;
    out = {
      ...out,
      simulation: {
        ok: sim['ok'] === true,
        trimmed: true,
        ...(leftOut > 0 ? { balance_changes_left_out: leftOut } : {}),
      },
    };
    if (fits(out)) return out;
  }
  // Still too big (a registered ABI with many arguments): the call's arguments go too.
  const call = out['call'];
  out = { ...out, call: isObject(call) ? { ...call, args: {}, args_left_out: true } : (call ?? null) };
  // Last: the largest remaining fields are left out (named) until the JSON fits.
  const leftOutFields: string[] = [];
  while (!fits({ ...out, left_out: leftOutFields })) {
    const [largest] = Object.entries(out)
      .filter(([, v]) => v !== null && jsonBytes(v) > 8)
      .sort((a, b) => jsonBytes(b[1]) - jsonBytes(a[1]));
    if (!largest) break;
    out = { ...out, [largest[0]]: null };
    leftOutFields.push(largest[0]);
  }
  return leftOutFields.length > 0 ? { ...out, left_out: leftOutFields } : out;
}

/** What a failed CreateApproval is answered with (see ApprovalGate.create). */
export function createRefusal(err: unknown, logger: Logger): CustosError {
  if (err instanceof CustosError && err.kind === 'invalid_argument') {
    if (err.field && /^summary([._[]|$)/.test(err.field)) {
      return new InvalidArgumentError(err.field, err.detail);
    }
    logger.error(
      { err: describeError(err), field: err.field },
      'approvals refused the approval signer asked for (preview or rule)',
    );
    return new CustosError('internal', {
      detail: 'the approval could not be requested (approvals refused its preview); nothing was signed',
    });
  }
  logger.warn({ err: describeError(err) }, 'approvals did not answer CreateApproval');
  return new UnavailableError('the approval could not be requested; nothing was signed');
}

/**
 * Signer's side of approvals (issue 19): the platform-created approval (with the server's preview
 * and the deciding rule) of an action the agent's action_approval_policy sends to humans (callers
 * match the policy with matchApprovalPolicy themselves: a match without a gate is 503), and the
 * single use of an approved one on resume. The approvals service decides and consumes; signer only
 * asks.
 */
export class ApprovalGate {
  constructor(
    private readonly deps: {
      approvals?: Approvals | undefined;
      preview?: PreviewChains | undefined;
      logger: Logger;
      /** Bound of each chain call of a preview. */
      previewTimeoutMs?: number;
    },
  ) {}

  private client(): Approvals {
    if (!this.deps.approvals) {
      throw new UnavailableError('approvals are not reachable from this signer; nothing was signed');
    }
    return this.deps.approvals;
  }

  /** The approver's preview of a transaction, computed here (never a failure: a minimal one at worst). */
  async preview(
    scope: IntentScope,
    t: HeldTx,
    match: RuleMatch,
    summary: Summary | undefined,
  ): Promise<Record<string, unknown>> {
    let rpc: PreviewRpc | undefined;
    if (scope.chain.family === 'evm' && this.deps.preview && scope.chain.rpcUrl) {
      try {
        rpc = this.deps.preview.forChain(scope.chain);
      } catch {
        rpc = undefined;
      }
    }
    const input = {
      chain: {
        name: scope.chain.name,
        chainId: scope.chain.chainId,
        family: scope.chain.family,
        nativeSymbol: scope.chain.nativeCurrency,
        decimals: scope.chain.nativeDecimals,
      },
      from: t.from,
      to: t.to,
      valueWei: t.valueWei,
      data: t.data || '0x',
      ...(t.token ? { token: t.token } : {}),
      summary: previewSummary(summary),
      rule: match.ruleJson,
      tier: match.tier,
    };
    try {
      const p = await buildPreview(input, rpc, { timeoutMs: this.deps.previewTimeoutMs ?? 5000 });
      return boundPreview(p);
    } catch (err) {
      this.deps.logger.warn(
        { err: describeError(err) },
        'approval preview failed; a minimal one is attached',
      );
      return {
        chain: input.chain.name,
        chain_id: String(input.chain.chainId),
        from: t.from,
        to: t.to,
        value_wei: t.valueWei.toString(),
        call: null,
        token_transfer: t.token
          ? { token: t.token.mint, recipient: t.to, amount_raw: t.token.amountRaw?.toString() ?? null }
          : null,
        simulation: null,
        rule: match.ruleJson,
        risk_tier: match.tier,
        summary: input.summary ?? null,
        flags: [],
      };
    }
  }

  /**
   * Asks humans: the platform-created approval of `target`; its id. A refusal of the agent's
   * summary by approvals (INVALID_ARGUMENT naming a `summary…` field) is 400 naming that field; any
   * other INVALID_ARGUMENT (a preview or rule approvals finds too big) is signer's fault, 500; no
   * answer is 503.
   */
  async create(
    scope: IntentScope,
    o: {
      action: string;
      targetType: 'transaction' | 'sign_intent';
      targetId: string;
      summary: Summary;
      payload: Record<string, unknown>;
      preview: Record<string, unknown> | undefined;
      match: RuleMatch;
    },
  ): Promise<Approval> {
    const requirement = requirementOf(o.match);
    const client = this.client();
    try {
      return await client.create({
        orgId: scope.agent.orgId,
        agentId: scope.agent.agentId,
        agentCreatedBy: scope.settings.createdBy ?? '',
        action: o.action,
        targetType: o.targetType,
        targetId: o.targetId,
        summary: o.summary,
        payload: o.payload,
        preview: o.preview,
        rule: o.match.ruleJson,
        riskTier: o.match.tier,
        ...(requirement ? { requirement } : {}),
        expirySecs: String(o.match.expirySecs ?? 0),
      });
    } catch (err) {
      throw createRefusal(err, this.deps.logger);
    }
  }

  /**
   * Uses the approval once for its target (approvals' conditional update decides between racing
   * resumes): 403 `approval_required` naming it when refused; 503 when approvals cannot answer.
   */
  async consume(
    scope: IntentScope,
    o: { approvalId: string; action: string; targetType: 'transaction' | 'sign_intent'; targetId: string },
  ): Promise<Approval> {
    if (!isUuid(o.approvalId)) throw approvalRequired('approval_id names no approval');
    try {
      return await this.client().consume({
        approvalId: o.approvalId.toLowerCase(),
        orgId: scope.agent.orgId,
        agentId: scope.agent.agentId,
        action: o.action,
        targetType: o.targetType,
        targetId: o.targetId,
      });
    } catch (err) {
      if (err instanceof CustosError && err.kind === 'permission_denied') throw err;
      this.deps.logger.warn({ err: describeError(err) }, 'approvals did not answer ConsumeApproval');
      if (err instanceof CustosError && err.kind === 'unavailable') throw err;
      throw new UnavailableError('the approval could not be checked; nothing was signed');
    }
  }

  /**
   * The held transaction a resume names, when it may be resumed by this request: this agent's, in
   * this org, still `awaiting_approval`, made from the same body (`requestHash`), on the same key.
   * Anything else is 403 `approval_required` (naming the approval only to its own agent).
   */
  checkResume(
    scope: IntentScope,
    row: TxRecord | undefined,
    requestHash: string,
  ): TxRecord & { approvalId: string } {
    const mine = row && row.orgId === scope.agent.orgId && row.agentId === scope.agent.agentId;
    if (!row || !mine)
      throw approvalRequired('resume_tx_id names no transaction of this agent awaiting approval');
    if (row.status !== 'awaiting_approval' || !row.approvalId) {
      throw approvalRequired(
        `transaction ${row.id} is not awaiting approval (it is ${row.status})`,
        row.approvalId,
      );
    }
    if (row.requestHash !== requestHash) {
      throw approvalRequired(
        'the body differs from the transaction awaiting approval: resume with the same body and resume_tx_id',
        row.approvalId,
      );
    }
    if (row.keyId !== scope.key.id || row.chainName !== scope.chain.name) {
      throw approvalRequired(
        "the agent's signing key changed since the transaction was held: submit it again",
        row.approvalId,
      );
    }
    return row as TxRecord & { approvalId: string };
  }
}
