import { type Logger, describeError } from '@custos/service-kit';
import type { ChainService } from '../chains/chain-service.js';
import { type EvmRpcPool, type EvmTxRpc, EvmRpcError } from '../evm/index.js';
import { type ChainAdapters, ChainRpcError, type TransferOps } from '../keys/chain-adapter.js';
import { endpointOf } from './transfer-flow.js';
import { systemAudit, writeBroadcast } from './tx-records.js';
import { NEVER_ASKED_AFTER_MS, type TxStore } from './tx-store.js';
import type { TxRecord } from './tx-types.js';

/** How the receipt watcher runs. */
export interface WatcherOptions {
  /** Pause between rounds, and before a not-yet-mined transaction is looked at again. */
  intervalMs: number;
  /** At most this many transactions per round. */
  batch: number;
  /**
   * A transaction still `pending` or `signed` this long after its creation was left by a request
   * that never finished (signer stopped): the watcher finishes it.
   */
  staleMs: number;
  /** EVM_RPC_TIMEOUT_MS: how long one call to a chain's node may take. */
  rpcTimeoutMs?: number;
  /** How long a leased row stays out of other rounds (renewed while a round works on it). */
  leaseMs?: number;
}

/**
 * A broadcast transaction that looks dropped (nonce passed, no receipt, unknown to the node) is
 * concluded so only when it still looks so this many blocks after it was first seen so.
 */
export const DROP_CONFIRM_BLOCKS = 2n;

/** At most this many transactions are recovered at once (each may wait on a dead endpoint). */
const RECOVER_CONCURRENCY = 8;

/** Runs `f` on every item, at most `limit` at a time. */
async function eachLimited<T>(items: T[], limit: number, f: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const t = items[next++]!;
      await f(t);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/**
 * Follows `broadcast` transactions to their receipt (`eth_getTransactionReceipt`): `confirmed`
 * with block number and gas used, or `failed` when the receipt's status is 0. It reads the rows to
 * follow from the database each round, so it resumes after a restart; a round leases its rows
 * (`FOR UPDATE SKIP LOCKED`, then `watch_after` in the future), so two replicas never act on one row.
 */
export class TxWatcher {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private recoverTimer: NodeJS.Timeout | undefined;
  private recovering: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly deps: {
      store: TxStore;
      chains: Pick<ChainService, 'resolve'>;
      rpc: EvmRpcPool;
      logger: Logger;
      /** The families' adapters: non-EVM rows are followed through their `transfers.status`. */
      adapters?: ChainAdapters;
    },
    private readonly o: WatcherOptions,
  ) {}

  start(): void {
    const tick = () => {
      if (this.stopped) return;
      this.running = this.round()
        .then(() => undefined)
        .catch((err) =>
          this.deps.logger.warn({ err: describeError(err) }, 'transaction watcher round failed'),
        )
        .finally(() => {
          this.running = undefined;
          if (!this.stopped) this.timer = setTimeout(tick, this.o.intervalMs);
        });
    };
    this.timer = setTimeout(tick, this.o.intervalMs);
    // Recovery runs in its own loop: re-sends to a dead endpoint never hold up receipts.
    const recoverTick = () => {
      if (this.stopped) return;
      this.recovering = this.recover()
        .then(() => undefined)
        .catch((err) =>
          this.deps.logger.warn({ err: describeError(err) }, 'transaction recovery round failed'),
        )
        .finally(() => {
          this.recovering = undefined;
          if (!this.stopped) this.recoverTimer = setTimeout(recoverTick, this.o.intervalMs);
        });
    };
    this.recoverTimer = setTimeout(recoverTick, this.o.intervalMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.recoverTimer) clearTimeout(this.recoverTimer);
    await Promise.all([this.running, this.recovering]);
  }

  /**
   * How long a leased row stays out of other rounds. Short, so that rows a stopped (or killed)
   * replica held come back soon; a round that is still working on its rows renews their lease every
   * third of it (`keepLeased`), however long its chain calls take, so no other replica acts on them.
   */
  private leaseMs(): number {
    return this.o.leaseMs ?? Math.max(30_000, this.o.intervalMs * 5);
  }

  /**
   * Runs `work` while renewing the lease of the rows in `held` (the work removes a row when it is
   * done with it), one renewal at a time. A renewal that fails is logged: the rows come back when
   * their lease runs out.
   */
  private async keepLeased<T>(held: Set<string>, work: () => Promise<T>): Promise<T> {
    const lease = this.leaseMs();
    // One renewal at a time: a slow database never piles renewals up behind each other.
    let renewing = false;
    const timer = setInterval(
      () => {
        if (held.size === 0 || renewing) return;
        renewing = true;
        this.deps.store
          .renewLease([...held], lease)
          .catch((err) => this.deps.logger.warn({ err: describeError(err) }, 'renewing leases failed'))
          .finally(() => {
            renewing = false;
          });
      },
      Math.floor(lease / 3),
    );
    try {
      return await work();
    } finally {
      clearInterval(timer);
    }
  }

  /**
   * Finishes what a stopped request left: a `pending` row (nonce taken, never signed), or a `signed`
   * one never given to the node (no send_attempted_at), ends `failed` and gives its nonce back; a
   * `signed` row whose send was attempted has its bytes sent again (the same transaction: a node
   * that has it already answers so), then it is `broadcast`; when the node refuses them and has
   * no receipt of it, it ends `failed` and gives its nonce back. A held (`awaiting_approval`) row
   * still without its approval id after NEVER_ASKED_AFTER_MS (or staleMs if longer) ends `failed`.
   */
  async recover(): Promise<number> {
    const lease = this.leaseMs();
    const { store } = this.deps;
    let done = 0;
    for (const t of await store.leaseStale('pending', this.o.staleMs, this.o.batch, lease)) {
      const r = await store.failBeforeBroadcast(t.id, 'abandoned before it was signed', (tx, row) =>
        systemAudit(tx, 'agent.transaction.failed', row, { error: 'abandoned' }),
      );
      if (r) done += 1;
    }
    // Held rows whose approval was never asked for (signer stopped between recording one and naming
    // its approval): failed, audited, their Idempotency-Key given back.
    const neverAskedMs = Math.max(this.o.staleMs, NEVER_ASKED_AFTER_MS);
    for (const id of await store.neverAsked(neverAskedMs, this.o.batch)) {
      if (await store.failNeverAsked(id, neverAskedMs)) done += 1;
    }
    const signed = await store.leaseStale('signed', this.o.staleMs, this.o.batch, lease);
    const held = new Set(signed.map((t) => t.id));
    await this.keepLeased(held, () =>
      eachLimited(signed, RECOVER_CONCURRENCY, async (t) => {
        try {
          if (t.sendAttemptedAt === null) {
            // Its request stopped before giving it to the node: never sent, so the nonce goes back.
            const r = await store.failBeforeBroadcast(t.id, 'abandoned before it was sent', (tx, row) =>
              systemAudit(tx, 'agent.transaction.failed', row, { error: 'abandoned' }),
            );
            if (r) done += 1;
            return;
          }
          if (t.family !== 'evm' ? await this.resendTransfer(t) : await this.resend(t)) done += 1;
        } catch (err) {
          this.deps.logger.warn(
            { tx_id: t.id, err: describeError(err) },
            're-sending a signed transaction failed; retried later',
          );
        } finally {
          held.delete(t.id);
        }
      }),
    );
    return done;
  }

  /**
   * Sends a `signed` row's bytes again. Whatever the node answers, the chain is asked before
   * anything is concluded: a receipt, or a node that knows the transaction, means it arrived
   * (`broadcast`); only a definite refusal of a transaction the node does not have, whose nonce
   * the chain has not passed, gives the nonce back (`failed`). A nonce the chain passed without
   * this transaction was used by another: `failed`, nonce not given back. No answer: retried later.
   */
  private async resend(t: TxRecord): Promise<boolean> {
    const chain = await this.deps.chains.resolve(t.chainName, 'chain', true);
    const rpc = this.deps.rpc.forChain(chain);
    let refusal: EvmRpcError | undefined;
    try {
      await rpc.sendRawTransaction(t.signedTx!);
    } catch (err) {
      if (!(err instanceof EvmRpcError)) throw err;
      // Mined already (nonce too low), in the pool (already known), refused, or no answer: ask.
      // "Already known" is the node saying it holds these bytes: arrived, whatever a lookup on
      // another backend of a load-balanced endpoint answers.
      const arrived =
        err.alreadyKnown ||
        (await rpc.receipt(t.txHash!)) !== null ||
        (await rpc.knowsTransaction(t.txHash!));
      if (!arrived) {
        if (!err.rejected) throw err; // no answer and unknown: try again next round
        refusal = err;
      }
    }
    if (refusal) {
      const message = `broadcast failed: ${refusal.message}`;
      if (refusal.nonceUsed) {
        // Another transaction of the key took this nonce: it is not ours to give back.
        const r = await this.deps.store.failBeforeBroadcast(
          t.id,
          message,
          (tx, row) => systemAudit(tx, 'agent.transaction.failed', row, { error: message }),
          { giveBack: false },
        );
        return !!r;
      }
      const r = await this.deps.store.failBeforeBroadcast(t.id, message, (tx, row) =>
        systemAudit(tx, 'agent.transaction.failed', row, { error: message }),
      );
      return !!r;
    }
    await this.deps.store.markBroadcast(t.id, (tx, row) => writeBroadcast(tx, 'system', row));
    return true;
  }

  /**
   * A broadcast row with no receipt yet, broadcast a while ago: when the chain's mined nonce count
   * of the key passed its nonce, the node has no receipt of it and does not know it, another
   * transaction took the nonce (replaced or dropped) and it will never be mined: `failed` — but
   * only when that still holds in a round DROP_CONFIRM_BLOCKS blocks after the first (nonce count
   * and receipt may come from different backends of one endpoint). When the node does not know it
   * (dropped from the pool, node restarted), its stored bytes are sent again.
   */
  private async checkUnmined(t: TxRecord, rpc: EvmTxRpc): Promise<void> {
    const mined = await rpc.latestNonce(t.fromAddress);
    if (t.nonce !== null && mined > t.nonce) {
      // The receipt may have landed between the reads: look once more before suspecting.
      if ((await rpc.receipt(t.txHash!)) === null && !(await rpc.knowsTransaction(t.txHash!))) {
        const head = await rpc.blockNumber();
        if (t.dropSeenBlock === null) {
          await this.deps.store.markDropSeen(t.id, head);
        } else if (head >= t.dropSeenBlock + DROP_CONFIRM_BLOCKS) {
          await this.deps.store.dropBroadcast(
            t.id,
            'replaced or dropped: the chain mined another transaction with its nonce',
          );
        }
        return;
      }
      // Known, or mined: not dropped (its receipt will come).
      if (t.dropSeenBlock !== null) await this.deps.store.markDropSeen(t.id, null);
      return;
    }
    if (!(await rpc.knowsTransaction(t.txHash!))) {
      await rpc.sendRawTransaction(t.signedTx!).catch((err: unknown) => {
        this.deps.logger.warn(
          { tx_id: t.id, err: describeError(err) },
          'sending a transaction the node lost again failed; retried later',
        );
      });
    }
  }

  /**
   * How long a non-EVM transfer must keep looking expired before it is concluded so: at least
   * three watcher rounds and 10 s.
   */
  private expireConfirmMs(): number {
    return Math.max(10_000, 3 * this.o.intervalMs);
  }

  /** The transfer operations and node endpoint of a non-EVM row's chain. */
  private async transferChain(t: TxRecord): Promise<{ ops: TransferOps; ep: ReturnType<typeof endpointOf> }> {
    const chain = await this.deps.chains.resolve(t.chainName, 'chain', true);
    const ops = this.deps.adapters?.[chain.family]?.transfers;
    if (!ops) throw new Error(`no transfer adapter for the ${chain.family} family`);
    return { ops, ep: endpointOf(chain, this.o.rpcTimeoutMs ?? 10_000) };
  }

  private expiryOf(t: TxRecord) {
    if (!t.expiryKind || t.expiryValue === null) return undefined;
    return {
      kind: t.expiryKind as 'block_height' | 'ledger' | 'slot' | 'time_ms',
      value: BigInt(t.expiryValue),
    };
  }

  /**
   * One broadcast non-EVM transfer: where the chain says it is. Included → `confirmed` or `failed`
   * (the chain's execution failed it) with block and fee; never includable any more → `failed`,
   * its inputs and sequence freed (`expired`); unknown to the node → its bytes are sent again.
   * Returns true when it settled.
   */
  private async followTransfer(t: TxRecord): Promise<boolean> {
    const { ops, ep } = await this.transferChain(t);
    const expiry = this.expiryOf(t);
    const st = await ops.status(ep, {
      txHash: t.txHash!,
      signedTx: t.signedTx ?? '',
      ...(expiry ? { expiry } : {}),
    });
    switch (st.state) {
      case 'confirmed':
      case 'failed': {
        const ok = st.state === 'confirmed';
        const r = await this.deps.store.settleTransfer(
          t.id,
          { ok, block: st.block, fee: st.fee, ...(ok ? {} : { reason: st.reason }) },
          (tx, row) =>
            systemAudit(tx, ok ? 'agent.transaction.confirmed' : 'agent.transaction.failed', row, {
              ...(row.blockNumber !== null ? { block: row.blockNumber.toString() } : {}),
              ...(row.fee !== null ? { fee: row.fee } : {}),
              ...(ok ? {} : { error: row.errorMessage }),
            }),
        );
        return !!r;
      }
      case 'expired': {
        // Concluded only when it still looks so a while after it first did (a load-balanced
        // endpoint's backends may disagree for a moment; an expired transfer frees its inputs and
        // sequence for good): `drop_seen_block` holds, for non-EVM rows, when (epoch ms) it was first seen.
        const now = Date.now();
        if (t.dropSeenBlock === null) {
          await this.deps.store.markDropSeen(t.id, BigInt(now));
          await this.deps.store.watchLater(t.id, this.o.intervalMs);
          return false;
        }
        if (now - Number(t.dropSeenBlock) < this.expireConfirmMs()) {
          await this.deps.store.watchLater(t.id, this.o.intervalMs);
          return false;
        }
        const r = await this.deps.store.expire(t.id, `expired: ${st.reason}`, (tx, row) =>
          systemAudit(tx, 'agent.transaction.expired', row, { error: row.errorMessage }),
        );
        return !!r;
      }
      case 'unknown':
        if (t.dropSeenBlock !== null) await this.deps.store.markDropSeen(t.id, null);
        await ops.broadcast(ep, { signedTx: t.signedTx!, txHash: t.txHash! }).catch((err: unknown) => {
          this.deps.logger.warn(
            { tx_id: t.id, err: describeError(err) },
            'sending a transfer the node does not know again failed; retried later',
          );
        });
        await this.deps.store.watchLater(t.id, this.o.intervalMs);
        return false;
      case 'pending':
        if (t.dropSeenBlock !== null) await this.deps.store.markDropSeen(t.id, null);
        await this.deps.store.watchLater(t.id, this.o.intervalMs);
        return false;
    }
  }

  /**
   * Sends a non-EVM `signed` row's bytes again (a node that has them says so). A definite refusal
   * of bytes the chain does not know ends it `failed`, its inputs and sequence freed; no answer is
   * retried later.
   */
  private async resendTransfer(t: TxRecord): Promise<boolean> {
    const { ops, ep } = await this.transferChain(t);
    try {
      await ops.broadcast(ep, { signedTx: t.signedTx!, txHash: t.txHash! });
    } catch (err) {
      if (!(err instanceof ChainRpcError)) throw err;
      if (!err.alreadyKnown) {
        const expiry = this.expiryOf(t);
        const st = await ops.status(ep, {
          txHash: t.txHash!,
          signedTx: t.signedTx ?? '',
          ...(expiry ? { expiry } : {}),
        });
        // `expired` counts as arrived here: the first send may have landed and a lagging backend
        // answered; once `broadcast`, the held expiry of followTransfer decides (and frees what it holds).
        const arrived =
          st.state === 'pending' ||
          st.state === 'confirmed' ||
          st.state === 'failed' ||
          st.state === 'expired';
        if (!arrived) {
          if (!err.rejected) throw err;
          // A chain with a deadline (blockhash, ledger, ttl, expiration) decides by it: a refusal
          // from a lagging backend while the first send may still land is not the end.
          if (st.state === 'unknown' && expiry) throw err;
          const message = `broadcast failed: ${err.message}`;
          const r = await this.deps.store.failBeforeBroadcast(t.id, message, (tx, row) =>
            systemAudit(tx, 'agent.transaction.failed', row, { error: message }),
          );
          return !!r;
        }
      }
    }
    await this.deps.store.markBroadcast(t.id, (tx, row) => writeBroadcast(tx, 'system', row));
    return true;
  }

  /** One round: lease due rows, look up their receipts, record what is mined. Returns how many settled. */
  async round(): Promise<number> {
    const rows = await this.deps.store.leaseForWatch(this.o.batch, this.leaseMs());
    const held = new Set(rows.map((t) => t.id));
    let settled = 0;
    await this.keepLeased(held, () =>
      Promise.all(
        rows.map(async (t) => {
          try {
            if (t.family !== 'evm') {
              if (await this.followTransfer(t)) settled += 1;
              return;
            }
            const chain = await this.deps.chains.resolve(t.chainName, 'chain', true);
            const rpc = this.deps.rpc.forChain(chain);
            const r = await rpc.receipt(t.txHash!);
            if (!r) {
              const since = t.broadcastAt ? Date.now() - new Date(t.broadcastAt).getTime() : 0;
              if (since > this.o.intervalMs * 5) await this.checkUnmined(t, rpc);
              await this.deps.store.watchLater(t.id, this.o.intervalMs);
              return;
            }
            // Recorded with the receipt, as the other families' outcomes are.
            await this.deps.store.settle(
              t.id,
              { ok: r.status === 1, blockNumber: r.blockNumber, gasUsed: r.gasUsed },
              (tx, row) =>
                systemAudit(
                  tx,
                  row.status === 'confirmed' ? 'agent.transaction.confirmed' : 'agent.transaction.failed',
                  row,
                  {
                    block: r.blockNumber.toString(),
                    gas_used: r.gasUsed.toString(),
                    ...(row.status === 'confirmed' ? {} : { error: row.errorMessage }),
                  },
                ),
            );
            settled += 1;
          } catch (err) {
            this.deps.logger.warn(
              { tx_id: t.id, err: describeError(err) },
              'receipt check failed; retried later',
            );
            await this.deps.store.watchLater(t.id, this.o.intervalMs * 5).catch(() => undefined);
          } finally {
            held.delete(t.id);
          }
        }),
      ),
    );
    return settled;
  }
}
