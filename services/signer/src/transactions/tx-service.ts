import { randomUUID } from 'node:crypto';
import type { Principal } from '@custos/auth';
import type { SubmitTransactionRequest } from '@custos/proto/custos/signer/v1/transactions';
import {
  ConflictError,
  CustosError,
  InvalidArgumentError,
  type Logger,
  NotFoundError,
  PermissionDeniedError,
  type Transaction,
  UnavailableError,
  describeError,
  isUuid,
} from '@custos/service-kit';
import { type RuleMatch, matchApprovalPolicy } from '@custos/approval-rules';
import { failClosed, writeSignerAudit } from '../audit/signer-audit.js';
import type { ApprovalGate, HeldTx } from '../approvals/approval-gate.js';
import {
  TX_ACTION,
  approvalPayload,
  approvalRequestHash,
  evmTxFacts,
  summaryOr,
  transferFacts,
  transferHeld,
} from '../approvals/approval-fns.js';
import type { SanctionsScreen, ScreenResult } from '../screening/sanctions-screen.js';
import { evmRecipients } from '../screening/screening-fns.js';
import { approvalRequired } from '../peers/approvals-client.js';
import {
  type EvmRpcPool,
  EvmRpcError,
  buildEvmTransaction,
  evmCapsOf,
  fillEvmTransaction,
  signEvmTransaction,
} from '../evm/index.js';
import type { IntentContext, IntentScope } from '../intents/intent-context.js';
import type { Admission, Guardrails } from '../guardrails/guardrails.js';
import { approvedCodesOf, withGuardrailViolations, withSanctionsHit } from '../approvals/hold-reasons.js';
import { enforcementOf } from '@custos/guardrails';
import { agentIdOf } from '../keys/key-fns.js';
import type { IdentityClient } from '../peers/identity-client.js';
import {
  chainRefOf,
  checkChainAgrees,
  checkIdempotencyKey,
  decodeCursor,
  encodeCursor,
  evmRequestOf,
  refuseEvmFields,
  refuseTransferFieldsOnEvm,
  refuseUnsupported,
  requestHash,
  transferDetails,
  transferInputOf,
} from './tx-fns.js';
import { submitTransfer, transfersOf } from './transfer-flow.js';
import { type TransferInput, addressOn } from '../keys/chain-adapter.js';
import { txAudit } from './tx-records.js';
import { ANSWER_MARGIN_MS, type SendBudget, signAndSend } from './tx-send.js';
import { type HeldClaim, ResumeLostError, type TxStore } from './tx-store.js';
import type { TxRecord } from './tx-types.js';

/** The audit and event action of a submission. */
const ACTION = 'agent.transaction';

/**
 * How long the caller still waits for this submission: the gRPC call's deadline (the gateway sets
 * one per route) and whether the call was cancelled. Signer checks it before signing and before
 * broadcasting, so that it never signs or sends a transaction whose caller has already been told
 * "503" (a retry without Idempotency-Key would pay twice).
 */
export type SubmitBudget = SendBudget;

export { ANSWER_MARGIN_MS } from './tx-send.js';

/** No deadline, never cancelled (callers that are not a gRPC call). */
export const NO_BUDGET: SubmitBudget = { deadline: Infinity, cancelled: () => false };

/** A submission's outcome: the transaction, and whether it is an Idempotency-Key replay. */
export interface Submitted {
  tx: TxRecord;
  replayed: boolean;
}

/**
 * The Transactions API on EVM chains (issue 17). A submission passes the Intents API checks
 * (IntentContext), is parsed (400 naming the field), filled from the chain under the agent's fee
 * and gas caps, optionally simulated (`simulation_failed`, stored, nothing signed), given a nonce
 * in the database (per key and chain), signed with the agent's key (audited before broadcast,
 * fail-closed), broadcast, and followed by the receipt watcher. A failure before the node gives
 * the nonce back. Every refusal is audited as `agent.transaction.refused`.
 */
export class TransactionService {
  constructor(
    private readonly deps: {
      intents: IntentContext;
      store: TxStore;
      rpc: EvmRpcPool;
      identity: Pick<IdentityClient, 'requireAgentInOrg'>;
      logger: Logger;
      /**
       * EVM_RPC_TIMEOUT_MS: signing needs room for the key's opening and one chain call (the
       * broadcast) before the deadline; broadcasting needs room for one chain call.
       */
      rpcTimeoutMs?: number;
      /** TX_RECOVER_AFTER_SECONDS in ms: an Idempotency-Key claim with no transaction this old is taken over. */
      staleClaimMs?: number;
      /** The approval gate (issue 19); absent: a matching approval rule is 503, nothing signed. */
      gate?: ApprovalGate;
      /** The agent's guardrails (issue 20), judged and reserved before a nonce is taken. */
      guardrails?: Guardrails;
      /**
       * Sanctions screening (issue 20) of the recipients, by the agent's
       * `address_screening_policy.mode`; absent: an agent with screening on is 503, nothing signed.
       */
      sanctions?: Pick<SanctionsScreen, 'screen' | 'auditBlocked'>;
    },
  ) {}

  async submit(
    p: Principal,
    rawAgentId: string,
    req: SubmitTransactionRequest,
    budget: SubmitBudget = NO_BUDGET,
  ): Promise<Submitted> {
    const { intents } = this.deps;
    return intents.audited(p, ACTION, rawAgentId, async () => {
      const chainRef = chainRefOf(req);
      const scope = await intents.open(p, rawAgentId, chainRef, req.chain ? 'chain' : 'chain_id');
      checkChainAgrees(req, scope.chain);
      refuseUnsupported(req, scope.chain);
      let evmReq: ReturnType<typeof evmRequestOf> | undefined;
      let transfer: TransferInput | undefined;
      if (scope.chain.family === 'evm') {
        refuseTransferFieldsOnEvm(req);
        evmReq = evmRequestOf(req, scope.chain, scope.key.address);
      } else {
        refuseEvmFields(req, scope.chain.family);
        transfer = transfersOf(scope.adapter, scope.chain).parse(transferInputOf(req), scope.chain);
      }
      const key = req.idempotencyKey ? checkIdempotencyKey(req.idempotencyKey) : undefined;
      let held: HeldClaim | undefined;
      if (key) {
        const c = await this.deps.store.claim(
          scope.agent.agentId,
          key,
          requestHash(req),
          this.deps.staleClaimMs ?? 300_000,
        );
        if (c.kind === 'other_body') {
          throw new CustosError('unprocessable', {
            detail: 'this Idempotency-Key was used with a different request body',
            type: 'idempotency_key_reused',
            field: 'Idempotency-Key',
          });
        }
        if (c.kind === 'running') {
          throw new ConflictError(
            'a request with this Idempotency-Key is still running; retry later',
            'Idempotency-Key',
          );
        }
        if (c.kind === 'done') return { tx: c.tx, replayed: true };
        held = { key, claimId: c.claimId };
      }
      let recorded = false;
      let consumed = false;
      let resume: (TxRecord & { approvalId: string }) | undefined;
      try {
        const onRecorded = () => {
          recorded = true;
        };
        if (req.resumeTxId) {
          // A held transaction goes on once its approval is used; its rule is not evaluated again.
          const row = isUuid(req.resumeTxId)
            ? await this.deps.store.byId(req.resumeTxId.toLowerCase())
            : undefined;
          resume = this.gate().checkResume(scope, row, approvalRequestHash(req));
          // Screened again: the list may have changed while it waited. `deny` refuses now; under
          // `approve` a hit goes on only when it is the very one the human was shown.
          const hit = await this.screen(p, scope, evmReq, transfer);
          if (hit?.hit && resume.details['held_sanctions_address'] !== hit.address) {
            await this.deps.sanctions!.auditBlocked(p, scope.agent.agentId, hit);
            throw new PermissionDeniedError(
              `the recipient ${hit.address} is on the sanctions list ${hit.list}, which the approval did not show; nothing was signed`,
              { type: 'sanctions_blocked', extensions: { list: hit.list } },
            );
          }
        } else {
          const facts = evmReq ? evmTxFacts(scope.chain, evmReq) : transferFacts(scope.chain, transfer!);
          // A listed recipient under `deny` is refused here (403, audited); under `approve` it goes
          // to a human whatever the approval rules say.
          const screened = await this.screen(p, scope, evmReq, transfer);
          // Matched here, gate or not: a rule that matches with no gate wired is 503, never skipped.
          let match = matchApprovalPolicy(scope.settings.actionApprovalPolicy, facts);
          // What the hold is for beyond the rules, kept on the row for its resume.
          const heldFor: Record<string, string> = {};
          if (screened?.hit) {
            match = withSanctionsHit(match, screened);
            heldFor['held_sanctions_address'] = screened.address;
          }
          // Guardrails in `approve` mode: a violating transaction waits for a human.
          if (this.deps.guardrails && enforcementOf(scope.settings) === 'approve') {
            const v = await this.deps.guardrails.violations(scope, guardrailAmounts(facts, evmReq?.data));
            if (v.length > 0) {
              match = withGuardrailViolations(match, v);
              heldFor['held_guardrail_codes'] = [...new Set(v.map((x) => x.reasonCode))].join(',');
            }
          }
          if (match) {
            // A request its guardrails refuse is not put to humans (judged again on resume).
            await this.deps.guardrails?.admitTransaction(scope, guardrailAmounts(facts, evmReq?.data), {
              kind: 'transaction',
              reserve: false,
              holding: true,
            });
            const tx = await this.hold(scope, req, evmReq, transfer, match, held, onRecorded, heldFor);
            return { tx, replayed: false };
          }
        }
        const resumed = resume;
        const approve = resumed
          ? async () => {
              await this.gate().consume(scope, {
                approvalId: resumed.approvalId,
                action: TX_ACTION,
                targetType: 'transaction',
                targetId: resumed.id,
              });
              consumed = true;
            }
          : undefined;
        const tx = transfer
          ? await this.guarded(
              scope,
              transferAmounts(scope, transfer),
              approvedCodesOf(resumed),
              () => recorded,
              () =>
                submitTransfer(
                  {
                    store: this.deps.store,
                    logger: this.deps.logger,
                    rpcTimeoutMs: this.deps.rpcTimeoutMs ?? 10_000,
                    loader: this.deps.intents.loader,
                    audit: (t, action, row, extra) => this.audit(t, scope.agent, action, row, extra),
                  },
                  scope,
                  transfer,
                  held,
                  budget,
                  onRecorded,
                  resumed && approve ? { id: resumed.id, approve } : undefined,
                ),
            )
          : await this.run(
              scope,
              req,
              evmReq!,
              held,
              budget,
              onRecorded,
              resumed && approve
                ? { id: resumed.id, approve, approvedCodes: approvedCodesOf(resumed) }
                : undefined,
            );
        return { tx, replayed: false };
      } catch (err) {
        if (err instanceof ResumeLostError) {
          throw approvalRequired('the transaction is no longer awaiting approval', resume?.approvalId);
        }
        if (consumed && resume) {
          // The approval is used: the held transaction cannot wait for it any more.
          const why = err instanceof CustosError ? err.detail : 'an internal error';
          await this.deps.store
            .failAwaiting(
              resume.id,
              `the approval was used, but the transaction failed before it was signed: ${why}`,
              (t, row) => this.audit(t, scope.agent, 'agent.transaction.failed', row, { reason: why }),
            )
            .catch((e: unknown) =>
              this.deps.logger.error(
                { err: String(e), tx_id: resume!.id },
                'a resumed transaction was not marked failed',
              ),
            );
        }
        throw err;
      } finally {
        if (held && !recorded)
          await this.deps.store.unclaim(scope.agent.agentId, held).catch(() => undefined);
      }
    });
  }

  private async run(
    scope: IntentScope,
    req: SubmitTransactionRequest,
    evmReq: ReturnType<typeof evmRequestOf>,
    key: HeldClaim | undefined,
    budget: SubmitBudget,
    onRecorded: () => void,
    resume?: { id: string; approve: () => Promise<void>; approvedCodes?: string[] },
  ): Promise<TxRecord> {
    const { store, logger } = this.deps;
    const p = scope.agent;
    const rpc = this.deps.rpc.forChain(scope.chain);
    const base = {
      orgId: p.orgId,
      agentId: p.agentId,
      keyId: scope.key.id,
      chainName: scope.chain.name,
      chainId: scope.chain.chainId,
      fromAddress: scope.key.address,
      toAddress: evmReq.to,
      valueWei: evmReq.value.toString(),
      data: evmReq.data,
      txType: evmReq.type,
    };
    const caps = evmCapsOf(scope.settings);
    const chainCall = async <T>(what: string, f: () => Promise<T>): Promise<T> => {
      try {
        return await f();
      } catch (err) {
        if (err instanceof EvmRpcError && err.rejected) {
          // The node refused it (e.g. insufficient funds for gas * price + value): the caller's to fix.
          throw new CustosError('unprocessable', {
            detail: `the chain refused the transaction (${what}): ${err.message}`,
            type: 'chain_rejected',
          });
        }
        if (err instanceof EvmRpcError) {
          logger.warn({ chain: scope.chain.name, err: err.message }, `${what}: the chain's RPC failed`);
          throw new UnavailableError(
            `the ${scope.chain.name} RPC endpoint failed (${what}); nothing was signed`,
          );
        }
        throw err;
      }
    };
    if (req.simulateFirst) {
      const sim = await chainCall('simulation', () =>
        rpc.call({
          from: evmReq.from,
          to: evmReq.to,
          value: evmReq.value,
          data: evmReq.data,
          gasLimit: evmReq.gasLimit,
        }),
      );
      if (!sim.ok) {
        const t = await failClosed(logger, `${ACTION}.simulation_failed`, () =>
          store.insertFinal(
            {
              ...base,
              id: resume?.id ?? randomUUID(),
              status: 'simulation_failed',
              errorMessage: sim.reason,
              gasLimit: evmReq.gasLimit?.toString() ?? null,
            },
            key,
            (tx, row) =>
              this.audit(tx, p, 'agent.transaction.simulation_failed', row, { reason: sim.reason }),
            resume?.id,
          ),
        );
        onRecorded();
        return t;
      }
    }
    const filled = await chainCall('fees and gas', () => fillEvmTransaction(rpc, evmReq, caps));
    // A fee cap below the current base fee would never be mined: it would hold its nonce (and
    // every later one of the key) until it is dropped. Refused before a nonce is taken.
    const baseFee = await chainCall('base fee', () => rpc.baseFee());
    const cap = filled.type === 2 ? filled.maxFeePerGas : filled.gasPrice;
    if (baseFee !== null && cap !== undefined && cap < baseFee) {
      const field = filled.type === 2 ? 'max_fee_per_gas' : 'gas_price';
      const why = filled.clamped.includes(field) ? " (lowered to the agent's max_fee_per_gas_gwei)" : '';
      throw new CustosError('unprocessable', {
        detail: `${field} ${cap} wei${why} is below the chain's current base fee (${baseFee} wei): the transaction would not be mined`,
        type: 'fee_below_base_fee',
        field,
      });
    }
    const rpcTimeout = this.deps.rpcTimeoutMs ?? 10_000;
    // Signing opens the key (a vault-crypto call) and the broadcast that follows is one chain
    // call: both must fit before the caller's deadline (with the answer's margin), else the caller
    // would be told 503 while the transaction goes out. Checked before a nonce is taken, and again
    // before signing.
    const outOfTime = () =>
      budget.cancelled() || budget.deadline - Date.now() < 2 * rpcTimeout + ANSWER_MARGIN_MS;
    if (outOfTime()) {
      throw new UnavailableError(
        'the request ran out of time before the transaction was signed; nothing was signed or sent',
      );
    }
    const pending = await chainCall('pending nonce', () => rpc.pendingNonce(scope.key.address));
    // The guardrails, judged on the filled transaction, its amounts reserved on the day's totals
    // (403 guardrail_violation when enforced); given back if it ends before the chain.
    const admission = await this.deps.guardrails?.admitTransaction(
      scope,
      {
        to: filled.to,
        value: filled.value,
        data: filled.data,
        gasLimit: filled.gasLimit,
        ...(cap !== undefined ? { maxFeePerGas: cap } : {}),
      },
      { kind: 'transaction', reserve: true, approvedCodes: resume?.approvedCodes ?? [] },
    );
    let row: TxRecord;
    try {
      // A resume uses its approval last, once everything the chain had to say is known.
      if (resume) await resume.approve();
      row = await store.allocateAndInsert(
        {
          ...base,
          id: resume?.id ?? randomUUID(),
          gasLimit: filled.gasLimit.toString(),
          maxFeePerGas: filled.maxFeePerGas?.toString() ?? null,
          maxPriorityFeePerGas: filled.maxPriorityFeePerGas?.toString() ?? null,
          gasPrice: filled.gasPrice?.toString() ?? null,
        },
        pending,
        key,
        resume?.id,
      );
    } catch (err) {
      await this.deps.guardrails?.release(admission, 'not recorded');
      throw err;
    }
    onRecorded();
    // From here the row holds a nonce: any end short of the node gives it back.
    // `unclaim`: the request answers an error, so its Idempotency-Key claim goes back with the nonce.
    return this.releasedIfFailed(admission, row.id, () =>
      signAndSend({
        store,
        logger,
        actor: p,
        row,
        budget,
        nodeTimeoutMs: rpcTimeout,
        chainName: scope.chain.name,
        audit: (tx, action, r, extra) => this.audit(tx, p, action, r, extra),
        sign: () => {
          const unsigned = buildEvmTransaction({ ...filled, nonce: row.nonce! });
          return this.deps.intents.loader.withKey(scope.key, (pk) => signEvmTransaction(pk, unsigned));
        },
        send: (signed) => rpc.sendRawTransaction(signed.signedTx),
        verdictOf: (err) => (err instanceof EvmRpcError ? err : undefined),
      }),
    );
  }

  /**
   * Runs a recorded transaction's way to the chain and gives its guardrail reservation back when it
   * ends `failed` there (refused by the node, or given back before the broadcast). One that may
   * have reached the node (`signed`, `broadcast`) keeps it.
   */
  private async releasedIfFailed(
    admission: Admission | undefined,
    txId: string,
    f: () => Promise<TxRecord>,
  ): Promise<TxRecord> {
    const g = this.deps.guardrails;
    if (!g || !admission?.reservationId) return f();
    try {
      const t = await f();
      if (t.status === 'failed') await g.release(admission, 'failed before broadcast');
      return t;
    } catch (err) {
      const now = await this.deps.store.byId(txId).catch(() => undefined);
      if (now?.status === 'failed') await g.release(admission, 'failed before broadcast');
      throw err;
    }
  }

  /**
   * A non-EVM transfer under the guardrails: judged and reserved first; the reservation is given
   * back when the transfer ends `failed`, or is refused (4xx) before it is signed. A 503 keeps it
   * (the transfer may have gone out; the stricter side).
   */
  private async guarded(
    scope: IntentScope,
    amounts: { to: string; value: bigint },
    approvedCodes: string[],
    recorded: () => boolean,
    f: () => Promise<TxRecord>,
  ): Promise<TxRecord> {
    const g = this.deps.guardrails;
    if (!g) return f();
    const admission = await g.admitTransaction(scope, amounts, {
      kind: 'transaction',
      reserve: true,
      approvedCodes,
    });
    try {
      const t = await f();
      if (t.status === 'failed') await g.release(admission, 'failed before broadcast');
      return t;
    } catch (err) {
      if (err instanceof CustosError && err.httpStatus >= 400 && err.httpStatus < 500) {
        await g.release(admission, 'refused before it was signed');
      } else if (!recorded()) {
        // Nothing was recorded, so nothing was signed or sent (a node that failed while the
        // transfer was prepared, an answer out of time before signing): the day keeps nothing.
        await g.release(admission, 'ended before it was recorded');
      }
      throw err;
    }
  }

  /**
   * Screens the transaction's recipients (its `to` and an ERC-20 call's recipient or spender) by the
   * agent's `address_screening_policy.mode`: nothing when off; a hit under `deny` is audited and
   * thrown (403 `sanctions_blocked` naming the list); a hit under `approve` is returned.
   */
  private async screen(
    p: Principal,
    scope: IntentScope,
    evmReq: { to: string | null; data: string } | undefined,
    transfer: TransferInput | undefined,
  ): Promise<ScreenResult | undefined> {
    const mode = scope.settings.addressScreeningPolicy?.mode;
    if (!mode || mode === 'off') return undefined;
    if (!this.deps.sanctions)
      throw new UnavailableError('address screening is not configured on this signer');
    const to = evmReq ? evmRecipients(evmReq.to, evmReq.data) : [transfer!.to];
    return this.deps.sanctions.screen(p, scope.agent.agentId, mode, {
      family: scope.chain.family,
      chain: scope.chain.name,
      to,
    });
  }

  private gate(): ApprovalGate {
    if (!this.deps.gate) throw new UnavailableError('approvals are not configured on this signer');
    return this.deps.gate;
  }

  /**
   * A submission a rule sends to humans: recorded `awaiting_approval` (no nonce, nothing signed,
   * its Idempotency-Key linked), then the approval asked for with the server's preview. When it
   * cannot be asked for, the row ends `failed` and the answer is 503.
   */
  private async hold(
    scope: IntentScope,
    req: SubmitTransactionRequest,
    evmReq: ReturnType<typeof evmRequestOf> | undefined,
    transfer: TransferInput | undefined,
    match: RuleMatch,
    key: HeldClaim | undefined,
    onRecorded: () => void,
    heldFor: Record<string, string> = {},
  ): Promise<TxRecord> {
    const { store, logger } = this.deps;
    const gate = this.gate();
    const p = scope.agent;
    const id = randomUUID();
    const from = evmReq ? scope.key.address : addressOn(scope.adapter, scope.key, scope.chain);
    // A token transfer moves no native value: its token and amount are the preview's token_transfer.
    const heldTx: HeldTx = evmReq
      ? { from, to: evmReq.to ?? '', valueWei: evmReq.value, data: evmReq.data }
      : transferHeld(from, transfer!, transferFacts(scope.chain, transfer!));
    const { to, valueWei: value, data } = heldTx;
    await failClosed(logger, `${ACTION}.awaiting_approval`, () =>
      store.insertFinal(
        {
          id,
          orgId: p.orgId,
          agentId: p.agentId,
          keyId: scope.key.id,
          chainName: scope.chain.name,
          chainId: scope.chain.chainId,
          family: scope.chain.family,
          fromAddress: from,
          toAddress: evmReq ? evmReq.to : transfer!.to,
          valueWei: value.toString(),
          data,
          txType: evmReq ? evmReq.type : 0,
          gasLimit: evmReq?.gasLimit?.toString() ?? null,
          details: { ...(transfer ? transferDetails(transfer, {}) : {}), ...heldFor },
          status: 'awaiting_approval',
          requestHash: approvalRequestHash(req),
        },
        key,
        // Its record is written once the approval is known (it names it), below; a hold whose
        // approval cannot be asked for is recorded `agent.transaction.failed`.
        async () => undefined,
      ),
    );
    onRecorded();
    // Once CreateApproval answered: the approval that exists for this row (an orphan if the row
    // cannot name it).
    let approvalId: string | undefined;
    try {
      const preview = await gate.preview(scope, heldTx, match, req.summary);
      const approval = await gate.create(scope, {
        action: TX_ACTION,
        targetType: 'transaction',
        targetId: id,
        summary: summaryOr(
          req.summary,
          `Transaction on ${scope.chain.name} to ${to || '(contract creation)'}`,
        ),
        payload: {
          ...approvalPayload(scope.chain.name, to, req.value ?? '0', req.data ?? ''),
          ...(transfer?.tokenMint ? { token_mint: transfer.tokenMint } : {}),
        },
        preview,
        match,
      });
      approvalId = approval.id;
      const named = await failClosed(logger, `${ACTION}.awaiting_approval`, () =>
        store.setApproval(id, approval.id, (tx, r) =>
          this.audit(tx, p, 'agent.transaction.awaiting_approval', r, {
            approval_id: approval.id,
            risk_tier: match.tier,
            rule_index: match.ruleIndex,
          }),
        ),
      );
      // The row ended meanwhile (a claim of its key found it abandoned): it is not held.
      if (!named) {
        throw new UnavailableError(
          'the transaction ended before its approval could be recorded on it; nothing was signed',
        );
      }
      return named;
    } catch (err) {
      if (approvalId !== undefined) {
        // The approval exists but the transaction does not name it: nobody can resume with it.
        logger.error(
          { err: describeError(err), tx_id: id, approval_id: approvalId },
          'an approval was created for a held transaction that could not record it (orphan approval)',
        );
      } else {
        logger.warn(
          { err: String(err), tx_id: id },
          'the approval of a held transaction could not be asked for',
        );
      }
      // gate.create answers 400 (the summary refused), 500 (the preview refused) or 503.
      const answer =
        err instanceof CustosError
          ? err
          : new UnavailableError('the approval could not be requested; nothing was signed');
      const reason = (
        approvalId !== undefined
          ? `approval ${approvalId} was created but could not be recorded on the transaction`
          : answer.kind === 'invalid_argument'
            ? `the approval could not be requested: ${fieldDetail(answer)}`
            : answer.kind === 'internal'
              ? 'the approval could not be requested (approvals refused it)'
              : 'the approval could not be requested (approvals service unavailable)'
      ).slice(0, 500);
      await store
        .failAwaiting(id, reason, (tx, r) => this.audit(tx, p, 'agent.transaction.failed', r, { reason }), {
          unclaim: true,
        })
        .catch((e: unknown) =>
          logger.error({ err: describeError(e), tx_id: id }, 'a held transaction could not be ended failed'),
        );
      throw answer;
    }
  }

  private audit(
    tx: Transaction,
    p: IntentScope['agent'],
    action: string,
    t: TxRecord,
    extra: Record<string, unknown> = {},
  ): Promise<string> {
    return writeSignerAudit(tx, txAudit(p, action, t, extra));
  }

  /**
   * Who may read an agent's transactions: the agent itself, and humans of its org (signer asks
   * identity that the agent is in the caller's org). Another agent gets 404, as for the agent.
   */
  private async reader(p: Principal, rawAgentId: string): Promise<string> {
    const agentId = agentIdOf(rawAgentId);
    if (p.kind === 'agent') {
      if (p.agentId !== agentId) throw new NotFoundError('agent', rawAgentId);
      return agentId;
    }
    await this.deps.identity.requireAgentInOrg(p.orgId, agentId);
    return agentId;
  }

  async list(
    p: Principal,
    rawAgentId: string,
    o: { limit: number; cursor: string },
  ): Promise<{ txs: TxRecord[]; next: string }> {
    const agentId = await this.reader(p, rawAgentId);
    const limit = o.limit === 0 ? 50 : o.limit;
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
      throw new InvalidArgumentError('limit', 'must be an integer from 1 to 100');
    }
    const after = o.cursor ? decodeCursor(o.cursor) : undefined;
    const rows = await this.deps.store.list(p.orgId, agentId, limit + 1, after);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return { txs: page, next: rows.length > limit && last ? encodeCursor(last) : '' };
  }

  async get(p: Principal, rawAgentId: string, txId: string): Promise<TxRecord> {
    const agentId = await this.reader(p, rawAgentId);
    if (!isUuid(txId)) throw new NotFoundError('transaction', txId.slice(0, 64));
    const t = await this.deps.store.get(p.orgId, agentId, txId.toLowerCase());
    if (!t) throw new NotFoundError('transaction', txId);
    return t;
  }
}

/** A refusal's field and detail as one text, the field once (a detail often names it already). */
function fieldDetail(e: CustosError): string {
  const detail = e.detail ?? '';
  const field = e.field ?? 'summary';
  return detail.includes(field) ? detail : `${field} ${detail}`.trim();
}

/** What a transaction moves, for its guardrails, from its approval facts (no gas: not filled yet). */
function guardrailAmounts(
  facts: { to?: string | undefined; valueWei?: bigint | undefined },
  data: string | undefined,
): { to: string | null; value: bigint; data?: string } {
  return { to: facts.to ? facts.to : null, value: facts.valueWei ?? 0n, ...(data ? { data } : {}) };
}

/** A non-EVM transfer's destination and native value (a token transfer moves none). */
function transferAmounts(scope: IntentScope, t: TransferInput): { to: string; value: bigint } {
  return { to: t.to, value: transferFacts(scope.chain, t).valueWei ?? 0n };
}
