import { type Logger, describeError } from '@custos/service-kit';
import type { ApprovalService } from './approval-service.js';

/** How the expiry sweeper runs. */
export interface SweeperOptions {
  /** APPROVAL_SWEEP_INTERVAL_MS: pause between rounds. */
  intervalMs: number;
  /** At most this many approvals per transaction; a round goes on while batches come back full. */
  batch: number;
}

/**
 * Ends approvals past their expiry (ApprovalService.sweep) every `intervalMs`. Several replicas may
 * sweep at once: each takes rows the others have not locked.
 */
export class ApprovalSweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly deps: { approvals: Pick<ApprovalService, 'sweep'>; logger: Logger },
    private readonly o: SweeperOptions,
  ) {}

  /** One round: batches until one comes back short; answers how many approvals it ended. */
  async round(): Promise<number> {
    let total = 0;
    for (;;) {
      const n = await this.deps.approvals.sweep(this.o.batch);
      total += n;
      if (n < this.o.batch || this.stopped) return total;
    }
  }

  start(): void {
    const tick = () => {
      if (this.stopped) return;
      this.running = this.round()
        .then((n) => {
          if (n > 0) this.deps.logger.info({ expired: n }, 'approvals expired');
        })
        .catch((err) => this.deps.logger.warn({ err: describeError(err) }, 'approval expiry round failed'))
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
}
