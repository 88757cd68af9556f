import { type Logger, describeError } from '@custos/service-kit';
import type { ChainService } from '../chains/chain-service.js';
import type { EvmRpcPool } from '../evm/index.js';
import type { TxStore } from './tx-store.js';

/** How the receipt watcher runs. */
export interface WatcherOptions {
  /** Pause between rounds, and before a not-yet-mined transaction is looked at again. */
  intervalMs: number;
  /** At most this many transactions per round. */
  batch: number;
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

  /** One round: lease due rows, look up their receipts, record what is mined. Returns how many settled. */
  async round(): Promise<number> {
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
