import { cachedAnswer } from './cached-answer';

describe('cachedAnswer', () => {
  it('asks once per period, shares a call in flight, and asks again after a failure', async () => {
    let clock = 1_000;
    let calls = 0;
    let fail = false;
    const ask = async () => {
      calls++;
      await new Promise((r) => setTimeout(r, 5));
      if (fail) throw new Error('peer unreachable');
      return calls;
    };
    const get = cachedAnswer(15_000, ask, () => clock);
    expect(await Promise.all([get(), get(), get()])).toEqual([1, 1, 1]);
    clock += 14_999;
    expect(await get()).toBe(1);
    clock += 1;
    expect(await get()).toBe(2);
    expect(calls).toBe(2);
    clock += 15_000;
    fail = true;
    await expect(get()).rejects.toThrow('peer unreachable');
    fail = false;
    expect(await get()).toBe(4); // the failure was not kept
    expect(calls).toBe(4);
  });
});
