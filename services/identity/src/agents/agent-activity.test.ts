import { AgentActivity } from './agent-activity';

// The store below only records what AgentActivity asks it to write; the SQL itself is exercised
// against Postgres in test/agent-exchange.spec.ts.
function recorder(fail = () => false) {
  const writes: Array<[string, number]> = [];
  const warnings: unknown[] = [];
  const store = {
    async touchLastActive(id: string, at: Date) {
      await Promise.resolve();
      if (fail()) throw new Error('database gone');
      writes.push([id, at.getTime()]);
    },
  };
  return { writes, warnings, logger: { warn: (o: unknown) => void warnings.push(o) }, store };
}

describe('AgentActivity (last_active_at, at most one write per agent per interval)', () => {
  it('writes once for a burst of exchanges by one agent, again only after the interval', async () => {
    const r = recorder();
    const activity = new AgentActivity(r.store, r.logger, 60_000);
    await Promise.all(Array.from({ length: 50 }, () => activity.seen('a', 1_000)));
    expect(r.writes).toEqual([['a', 1_000]]);
    await activity.seen('a', 60_999);
    expect(r.writes).toHaveLength(1);
    await activity.seen('a', 61_000);
    expect(r.writes).toEqual([
      ['a', 1_000],
      ['a', 61_000],
    ]);
  });

  it('writes each agent on its own', async () => {
    const r = recorder();
    const activity = new AgentActivity(r.store, r.logger, 60_000);
    await Promise.all(['a', 'b', 'a', 'c', 'b'].map((id) => activity.seen(id, 5)));
    expect(r.writes.map(([id]) => id).sort()).toEqual(['a', 'b', 'c']);
  });

  it('never rejects: a failed write is logged and the next exchange writes again', async () => {
    let failing = true;
    const r = recorder(() => failing);
    const activity = new AgentActivity(r.store, r.logger, 60_000);
    await expect(activity.seen('a', 10)).resolves.toBeUndefined();
    expect(r.writes).toEqual([]);
    expect(r.warnings).toHaveLength(1);
    failing = false;
    await activity.seen('a', 20);
    expect(r.writes).toEqual([['a', 20]]);
  });

  it('remembers at most maxTracked agents; a forgotten one is only written again', async () => {
    const r = recorder();
    const activity = new AgentActivity(r.store, r.logger, 60_000, 2);
    for (const id of ['a', 'b', 'c']) await activity.seen(id, 100);
    await activity.seen('c', 200);
    await activity.seen('b', 200);
    expect(r.writes).toHaveLength(3);
    // 'a' was the oldest and is forgotten: its next exchange writes again.
    await activity.seen('a', 300);
    expect(r.writes).toHaveLength(4);
  });
});
