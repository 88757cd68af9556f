import {
  CustosError,
  type Logger,
  type Transaction,
  UnavailableError,
  describeError,
} from '@custos/service-kit';
import type { AgentPrincipal } from '@custos/auth';
import { failClosed } from '../audit/signer-audit.js';
import { writeBroadcast } from './tx-records.js';
import type { TxStore } from './tx-store.js';
import type { TxRecord } from './tx-types.js';

/**
 * Room kept before the caller's deadline for the answer to travel back (signer → gateway →
 * client): a broadcast starts only with the node timeout plus this left, and is waited on only
 * until this much before the deadline.
 */
export const ANSWER_MARGIN_MS = 1000;

/** How long the caller still waits (the gRPC call's deadline and cancellation). */
export interface SendBudget {
  /** Epoch ms by which the answer must be back (Infinity: no deadline). */
  deadline: number;
  cancelled(): boolean;
}

/** What a node's failure says about a transaction it was given. */
export interface NodeVerdict {
  /** The node answered and refused these bytes: they are not in its pool. */
  rejected: boolean;
  /** The node already has these bytes. */
  alreadyKnown: boolean;
}

/**
 * The end every submission shares, EVM or not, once its row is `pending` holding what it needs
 * (nonce, sequence, inputs): with enough time left the bytes are signed, the signature recorded with
 * its audit record (fail-closed), the send attempt recorded before the call (recovery re-sends only
 * what may have reached the node), the broadcast waited on until ANSWER_MARGIN_MS before the
 * caller's deadline, and its outcome recorded: `broadcast` (with its event), `failed` when the node
 * refused the bytes, or left `signed` for the watcher when the node gave no usable answer. Any end
 * short of the node gives back what the row holds and, when the request answers an error, its
 * Idempotency-Key claim.
 */
export async function signAndSend(o: {
  store: Pick<TxStore, 'markSigned' | 'markSendAttempted' | 'markBroadcast' | 'failBeforeBroadcast'>;
  logger: Logger;
  actor: AgentPrincipal;
  row: TxRecord;
  budget: SendBudget;
  /** The per-call timeout of the node: signing needs two calls' room, the broadcast one. */
  nodeTimeoutMs: number;
  chainName: string;
  audit: (tx: Transaction, action: string, t: TxRecord, extra?: Record<string, unknown>) => Promise<string>;
  /** Signs the row's transaction (with the key loader). */
  sign: () => Promise<{ signedTx: string; txHash: string }>;
  send: (signed: { signedTx: string; txHash: string }) => Promise<unknown>;
  /** The node's verdict on a failed send; undefined when the failure is not the node's answer. */
  verdictOf: (err: unknown) => NodeVerdict | undefined;
}): Promise<TxRecord> {
  const { store, logger, row, budget } = o;
  const giveBack = async (message: string, g: { unclaim?: boolean } = {}): Promise<TxRecord> => {
    const t = await failClosed(logger, 'agent.transaction.failed', () =>
      store.failBeforeBroadcast(
        row.id,
        message,
        (tx, r) => o.audit(tx, 'agent.transaction.failed', r, { error: message }),
        g,
      ),
    );
    return t ?? row;
  };
  if (budget.cancelled() || budget.deadline - Date.now() < 2 * o.nodeTimeoutMs + ANSWER_MARGIN_MS) {
    await giveBack('the request ran out of time before signing', { unclaim: true });
    throw new UnavailableError(
      'the request ran out of time before the transaction was signed; nothing was signed or sent',
    );
  }
  let signed: { signedTx: string; txHash: string };
  try {
    signed = await o.sign();
    if (!signed.signedTx || !signed.txHash) throw new Error('no signed transaction came back');
  } catch (err) {
    logger.error({ tx_id: row.id, err: describeError(err) }, 'signing a transaction failed');
    await giveBack('the transaction could not be signed', { unclaim: true });
    throw err instanceof CustosError ? err : new UnavailableError('the transaction could not be signed');
  }
  return recordAndSend({ ...o, signed, giveBack, send: () => o.send(signed) });
}

/** From signed bytes to the node: the second half of signAndSend. */
async function recordAndSend(o: {
  store: Pick<TxStore, 'markSigned' | 'markSendAttempted' | 'markBroadcast'>;
  logger: Logger;
  actor: AgentPrincipal;
  row: TxRecord;
  signed: { signedTx: string; txHash: string };
  budget: SendBudget;
  /** The per-call timeout of the node: the broadcast starts only with this (+ margin) left. */
  nodeTimeoutMs: number;
  chainName: string;
  audit: (tx: Transaction, action: string, t: TxRecord) => Promise<string>;
  giveBack: (message: string, o?: { unclaim?: boolean }) => Promise<TxRecord>;
  send: () => Promise<unknown>;
  /** The node's verdict on a failed send; undefined when the failure is not the node's answer. */
  verdictOf: (err: unknown) => NodeVerdict | undefined;
}): Promise<TxRecord> {
  const { store, logger, row, budget } = o;
  let signedRow: TxRecord;
  try {
    signedRow = await failClosed(logger, 'agent.transaction.signed', () =>
      store.markSigned(row.id, o.signed, (tx, r) => o.audit(tx, 'agent.transaction.signed', r)),
    );
  } catch (err) {
    await o.giveBack('the signature could not be recorded', { unclaim: true }).catch(() => undefined);
    throw err;
  }
  if (budget.cancelled() || budget.deadline - Date.now() < o.nodeTimeoutMs + ANSWER_MARGIN_MS) {
    // Signed, never sent: nothing left signer, so what the row holds goes back and a retry is safe.
    await o.giveBack('the request ran out of time before the broadcast', { unclaim: true });
    throw new UnavailableError(
      'the request ran out of time before the transaction was sent; nothing was sent',
    );
  }
  try {
    // Recorded before the call: recovery re-sends only rows that may have reached the node.
    signedRow = await store.markSendAttempted(row.id);
  } catch (err) {
    logger.error({ tx_id: row.id, err: describeError(err) }, 'recording the send attempt failed');
    await o.giveBack('the send could not be recorded', { unclaim: true }).catch(() => undefined);
    throw new UnavailableError('the transaction could not be sent; nothing was sent');
  }
  // The broadcast is waited on only until the margin before the deadline: should the call
  // outlast its timeout, the caller still gets an answer (`signed`: it may have gone out; the
  // watcher follows) rather than a 503 while the transaction goes out.
  const send = o.send();
  let timer: NodeJS.Timeout | undefined;
  const deadlineTimer = new Promise<'out_of_time'>((resolve) => {
    const left = budget.deadline - Date.now() - ANSWER_MARGIN_MS;
    if (Number.isFinite(left)) timer = setTimeout(() => resolve('out_of_time'), Math.max(0, left));
  });
  try {
    const first = await Promise.race([send.then(() => 'sent' as const), deadlineTimer]);
    if (first === 'out_of_time') {
      send.catch(() => undefined); // its outcome is the watcher's to find
      logger.warn(
        { tx_id: row.id, chain: o.chainName },
        "broadcast unanswered before the caller's deadline; left signed for the watcher",
      );
      return signedRow;
    }
  } catch (err) {
    const message = `broadcast failed: ${err instanceof Error ? err.message : 'unknown error'}`;
    const v = o.verdictOf(err);
    if (v?.rejected && !v.alreadyKnown) {
      // The node refused these bytes: they are not in its pool; what the row holds goes back.
      logger.warn({ tx_id: row.id, chain: o.chainName, err: message }, 'broadcast refused; given back');
      return o.giveBack(message);
    }
    if (!v?.alreadyKnown) {
      // No answer, or one that says nothing about this transaction (timeout, reset, rate
      // limit): the node may have it. The row stays `signed`; the watcher sends the same bytes
      // again after TX_RECOVER_AFTER_SECONDS (a node that has them says so).
      logger.warn(
        { tx_id: row.id, chain: o.chainName, err: message },
        'broadcast unanswered; left signed for the watcher to send again',
      );
      return signedRow;
    }
  } finally {
    clearTimeout(timer);
  }
  try {
    return await store.markBroadcast(signedRow.id, (tx, r) => writeBroadcast(tx, o.actor, r));
  } catch (err) {
    // The node has the transaction: never answer an error a client would retry (it would pay
    // twice). The row stays `signed`; the watcher re-sends it (the node says "already known")
    // and records the broadcast and its event.
    logger.error(
      { tx_id: row.id, err: describeError(err) },
      'recording a broadcast failed; left signed for the watcher',
    );
    return signedRow;
  }
}
