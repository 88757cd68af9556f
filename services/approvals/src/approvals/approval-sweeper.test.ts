import { createLogger } from '@custos/service-kit';
import { ApprovalSweeper } from './approval-sweeper';

const logger = createLogger({ service: 'sweeper-test', level: 'silent' });

describe('ApprovalSweeper', () => {
  it('sweeps batch after batch until one comes back short', async () => {
    const answers = [10, 10, 3, 10];
    const calls: number[] = [];
    const sweeper = new ApprovalSweeper(
      {
        approvals: {
          sweep: async (batch: number) => {
            calls.push(batch);
            return answers.shift() ?? 0;
          },
        },
        logger,
      },
      { intervalMs: 1000, batch: 10 },
    );
    expect(await sweeper.round()).toBe(23);
    expect(calls).toEqual([10, 10, 10]);
  });

  it('keeps running after a failed round and stops cleanly', async () => {
    let n = 0;
    const sweeper = new ApprovalSweeper(
      {
        approvals: {
          sweep: async () => {
            n++;
            if (n === 1) throw new Error('database away');
            return 0;
          },
        },
        logger,
      },
      { intervalMs: 10, batch: 5 },
    );
    sweeper.start();
    const deadline = Date.now() + 5000;
    while (n < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    await sweeper.stop();
    const after = n;
    expect(after).toBeGreaterThanOrEqual(3);
    await new Promise((r) => setTimeout(r, 50));
    expect(n).toBe(after);
  });
});
