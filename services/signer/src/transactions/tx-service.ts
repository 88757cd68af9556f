import { randomUUID } from 'node:crypto';
import type { Principal } from '@custos/auth';
import type { SubmitTransactionRequest } from '@custos/proto/custos/signer/v1/transactions';
import {
  ConflictError,
  CustosError,
  InvalidArgumentError,
  type Logger,
  NotFoundError,
  type Transaction,
  UnavailableError,
  isUuid,
} from '@custos/service-kit';
import { failClosed, writeSignerAudit } from '../audit/signer-audit.js';
import {
  type EvmRpcPool,
  EvmRpcError,
  buildEvmTransaction,
  evmCapsOf,
  fillEvmTransaction,
  signEvmTransaction,
} from '../evm/index.js';
import type { IntentContext, IntentScope } from '../intents/intent-context.js';
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
  transferInputOf,
} from './tx-fns.js';
import { submitTransfer, transfersOf } from './transfer-flow.js';
import type { TransferInput } from '../keys/chain-adapter.js';
import { txAudit } from './tx-records.js';
import { ANSWER_MARGIN_MS, type SendBudget, signAndSend } from './tx-send.js';
import type { HeldClaim, TxStore } from './tx-store.js';
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
      if (req.resumeTxId) {
        // Approvals (issue 19) do not exist yet: no transaction can be awaiting one.
        throw new InvalidArgumentError('resume_tx_id', 'names no transaction awaiting approval');
      }
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
      try {
        const onRecorded = () => {
          recorded = true;
        };
        const tx = transfer
          ? await submitTransfer(
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
            )
          : await this.run(scope, req, evmReq!, held, budget, onRecorded);
        return { tx, replayed: false };
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
              id: randomUUID(),
              status: 'simulation_failed',
              errorMessage: sim.reason,
              gasLimit: evmReq.gasLimit?.toString() ?? null,
            },
            key,
            (tx, row) =>
              this.audit(tx, p, 'agent.transaction.simulation_failed', row, { reason: sim.reason }),
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
    const row = await store.allocateAndInsert(
      {
        ...base,
        id: randomUUID(),
        gasLimit: filled.gasLimit.toString(),
        maxFeePerGas: filled.maxFeePerGas?.toString() ?? null,
        maxPriorityFeePerGas: filled.maxPriorityFeePerGas?.toString() ?? null,
        gasPrice: filled.gasPrice?.toString() ?? null,
      },
      pending,
      key,
    );
    onRecorded();
    // From here the row holds a nonce: any end short of the node gives it back.
    // `unclaim`: the request answers an error, so its Idempotency-Key claim goes back with the nonce.
    return signAndSend({
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
    });
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
