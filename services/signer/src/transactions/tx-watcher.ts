import { type Logger, describeError } from '@custos/service-kit';
import type { ChainService } from '../chains/chain-service.js';
import { writeSignerAudit } from '../audit/signer-audit.js';
import { type EvmRpcPool, EvmRpcError } from '../evm/index.js';
import { txAudit, writeBroadcast } from './tx-records.js';
import type { TxStore } from './tx-store.js';
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
  private stopped = false;

  constructor(
    private readonly deps: {
      store: TxStore;
      chains: Pick<ChainService, 'resolve'>;
      rpc: EvmRpcPool;
      logger: Logger;
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
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  /**
   * Finishes what a stopped request left: a `pending` row (nonce taken, never signed) ends `failed`
   * and gives its nonce back; a `signed` row's bytes are sent again (the same transaction: a node
   * that has it already answers so), then it is `broadcast`; when the node refuses them and has
   * no receipt of it, it ends `failed` and gives its nonce back.
   */
  async recover(): Promise<number> {
    const lease = Math.max(30_000, this.o.intervalMs * 5);
    const { store } = this.deps;
    let done = 0;
    for (const t of await store.leaseStale('pending', this.o.staleMs, this.o.batch, lease)) {
      const r = await store.failBeforeBroadcast(t.id, 'abandoned before it was signed', (tx, row) =>
        writeSignerAudit(tx, txAudit('system', 'agent.transaction.failed', row, { error: 'abandoned' })),
      );
      if (r) done += 1;
    }
    for (const t of await store.leaseStale('signed', this.o.staleMs, this.o.batch, lease)) {
      try {
        if (await this.resend(t)) done += 1;
      } catch (err) {
        this.deps.logger.warn(
          { tx_id: t.id, err: describeError(err) },
          're-sending a signed transaction failed',
        );
      }
    }
    return done;
  }

  private async resend(t: TxRecord): Promise<boolean> {
    const chain = await this.deps.chains.resolve(t.chainName, 'chain', true);
    const rpc = this.deps.rpc.forChain(chain);
    let arrived = true;
    try {
      await rpc.sendRawTransaction(t.signedTx!);
    } catch (err) {
      if (!(err instanceof EvmRpcError) || !err.rejected) throw err;
      // Refused: the node has it already, or it was mined (nonce too low), or it is invalid.
      arrived =
        /already known|known transaction|already imported/i.test(err.message) ||
        !!(await rpc.receipt(t.txHash!));
      if (!arrived) {
        const message = `broadcast failed: ${err.message}`;
        const r = await this.deps.store.failBeforeBroadcast(t.id, message, (tx, row) =>
          writeSignerAudit(tx, txAudit('system', 'agent.transaction.failed', row, { error: message })),
        );
        return !!r;
      }
    }
    await this.deps.store.markBroadcast(t.id, (tx, row) => writeBroadcast(tx, 'system', row));
    return true;
  }

  /** One round: lease due rows, look up their receipts, record what is mined. Returns how many settled. */
  async round(): Promise<number> {
    await this.recover();
    const lease = Math.max(30_000, this.o.intervalMs * 5);
    const rows = await this.deps.store.leaseForWatch(this.o.batch, lease);
    let settled = 0;
    await Promise.all(
      rows.map(async (t) => {
        try {
          const chain = await this.deps.chains.resolve(t.chainName, 'chain', true);
          const r = await this.deps.rpc.forChain(chain).receipt(t.txHash!);
          if (!r) {
            await this.deps.store.watchLater(t.id, this.o.intervalMs);
            return;
          }
          await this.deps.store.settle(t.id, {
            ok: r.status === 1,
            blockNumber: r.blockNumber,
            gasUsed: r.gasUsed,
          });
          settled += 1;
        } catch (err) {
          this.deps.logger.warn(
            { tx_id: t.id, err: describeError(err) },
            'receipt check failed; retried later',
          );
          await this.deps.store.watchLater(t.id, this.o.intervalMs * 5).catch(() => undefined);
        }
      }),
    );
    return settled;
  }
}
