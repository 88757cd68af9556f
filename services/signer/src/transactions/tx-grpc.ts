import { type IdentityKeys, currentCaller } from '@custos/auth';
import type { TransactionServiceServer } from '@custos/proto/custos/signer/v1/transactions';
import type { AsyncService, RpcAccess } from '@custos/service-kit';
import { transactionMessage } from './tx-fns.js';
import type { SubmitBudget, TransactionService } from './tx-service.js';

/** The caller's deadline and cancellation, as grpc-js exposes them on the server call. */
export function budgetOf(call: { getDeadline(): Date | number; cancelled: boolean }): SubmitBudget {
  const d = call.getDeadline();
  const deadline = d instanceof Date ? d.getTime() : d;
  return { deadline: Number.isFinite(deadline) ? deadline : Infinity, cancelled: () => call.cancelled };
}

/** Who may call TransactionService: the gateway, for agents' (and humans' reading) requests. */
export const transactionAccess: RpcAccess<TransactionServiceServer> = { default: ['gateway'] };

/** gRPC adapter of TransactionService: verify the caller, call the rules, encode. */
export function transactionGrpc(deps: {
  keys: IdentityKeys;
  transactions: TransactionService;
}): AsyncService<TransactionServiceServer> {
  const caller = () => currentCaller(deps.keys);
  return {
    async submitTransaction(req, call) {
      const r = await deps.transactions.submit(await caller(), req.agentId, req, budgetOf(call));
      // The submitter always gets the signed bytes (reference: always present on the POST).
      return { transaction: transactionMessage(r.tx, true), replayed: r.replayed };
    },
    async listTransactions(req) {
      const r = await deps.transactions.list(await caller(), req.agentId, {
        limit: req.limit,
        cursor: req.cursor,
      });
      return {
        transactions: r.txs.map((t) => transactionMessage(t, req.includeSignedTx)),
        nextCursor: r.next,
      };
    },
    async getTransaction(req) {
      const t = await deps.transactions.get(await caller(), req.agentId, req.txId);
      return { transaction: transactionMessage(t, req.includeSignedTx) };
    },
  };
}
