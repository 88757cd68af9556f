import { Writable } from 'node:stream';
import type { IpRule } from '@custos/proto/custos/policy/v1/messages';
import { createLogger } from '@custos/service-kit';
import { IpRuleCache } from './ip-filter';

const logger = createLogger({
  service: 'ip-filter-test',
  level: 'error',
  destination: new Writable({ write: (_c, _e, cb) => cb() }),
});

const ruleOf = (id: string, cidr: string): IpRule => ({
  id,
  orgId: 'org',
  cidr,
  ruleType: 'block',
  description: '',
  createdBy: 'u',
  createdByType: 'user',
  createdAt: '',
});

describe('IpRuleCache', () => {
  function setup(ttlMs = 1000) {
    let now = 0;
    let calls = 0;
    let rules = [ruleOf('a', '10.0.0.0/8')];
    const cache = new IpRuleCache(
      async () => {
        calls++;
        await new Promise((r) => setImmediate(r));
        return rules;
      },
      ttlMs,
      logger,
      () => now,
    );
    return {
      cache,
      calls: () => calls,
      advance: (ms: number) => (now += ms),
      setRules: (r: IpRule[]) => (rules = r),
    };
  }

  it('asks once per org within the TTL, and again after it', async () => {
    const t = setup();
    expect((await t.cache.rules('org')).map((r) => r.id)).toEqual(['a']);
    t.setRules([ruleOf('b', '10.0.0.0/8')]);
    t.advance(999);
    expect((await t.cache.rules('org')).map((r) => r.id)).toEqual(['a']);
    expect(t.calls()).toBe(1);
    t.advance(1);
    expect((await t.cache.rules('org')).map((r) => r.id)).toEqual(['b']);
    expect(t.calls()).toBe(2);
  });

  it('shares one call among concurrent misses', async () => {
    const t = setup();
    await Promise.all(Array.from({ length: 20 }, () => t.cache.rules('org')));
    expect(t.calls()).toBe(1);
  });

  it('asks again at once after invalidate, and does not cache an answer that started before it', async () => {
    const t = setup();
    await t.cache.rules('org');
    const stale = t.cache.rules('other');
    t.cache.invalidate('other');
    await stale;
    t.setRules([]);
    t.cache.invalidate('org');
    expect(await t.cache.rules('org')).toEqual([]);
    expect(await t.cache.rules('other')).toEqual([]);
    expect(t.calls()).toBe(4);
  });

  it('skips a rule whose cidr it cannot read', async () => {
    const t = setup();
    t.setRules([ruleOf('bad', 'nonsense'), ruleOf('ok', '::/0')]);
    expect((await t.cache.rules('org')).map((r) => r.id)).toEqual(['ok']);
  });
});
