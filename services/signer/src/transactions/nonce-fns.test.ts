import fc from 'fast-check';
import { allocateNonce } from './nonce-fns.js';

describe('allocateNonce', () => {
  it('gives the stored next nonce, raised to the chain pending nonce', () => {
    expect(allocateNonce({ chainPending: 0, storedNext: 0, released: [] })).toEqual({
      nonce: 0,
      next: 1,
      drop: [],
    });
    expect(allocateNonce({ chainPending: 3, storedNext: 5, released: [] })).toEqual({
      nonce: 5,
      next: 6,
      drop: [],
    });
    expect(allocateNonce({ chainPending: 9, storedNext: 5, released: [] })).toEqual({
      nonce: 9,
      next: 10,
      drop: [],
    });
  });

  it('reuses the lowest released nonce the chain has not passed, and drops the passed ones', () => {
    expect(allocateNonce({ chainPending: 2, storedNext: 6, released: [4, 1, 3] })).toEqual({
      nonce: 3,
      next: 6,
      drop: [1, 3],
    });
    expect(allocateNonce({ chainPending: 7, storedNext: 6, released: [4, 5] })).toEqual({
      nonce: 7,
      next: 8,
      drop: [4, 5],
    });
  });

  /**
   * A model of a key's life: allocations (with the chain's pending nonce as it may be), broadcasts
   * that reach the node, failures before the node (released). What the code promises: no nonce is
   * given to two live transactions, and an allocation never skips a free nonce: every nonce from
   * the chain's pending one up to the one given is held by a live transaction or at the node. So a
   * released nonce is a gap only until the next allocation, which fills it; a gap never reaches
   * the node behind a transaction sent later.
   */
  it('property: under any interleaving no nonce is held twice and no allocation skips a free nonce', () => {
    type Step =
      | { kind: 'alloc' }
      | { kind: 'send'; pick: number }
      | { kind: 'fail'; pick: number }
      | { kind: 'mine' };
    const step = fc.oneof(
      fc.constant<Step>({ kind: 'alloc' }),
      fc.nat(50).map<Step>((pick) => ({ kind: 'send', pick })),
      fc.nat(50).map<Step>((pick) => ({ kind: 'fail', pick })),
      fc.constant<Step>({ kind: 'mine' }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 80 }), (steps) => {
        let storedNext = 0;
        let released: number[] = [];
        const held = new Set<number>(); // allocated, not yet sent or failed
        const pool = new Set<number>(); // at the node, not mined
        let mined = 0; // the chain's confirmed nonce count
        const chainPending = () => {
          let n = mined;
          while (pool.has(n)) n += 1;
          return n;
        };
        for (const s of steps) {
          if (s.kind === 'alloc') {
            const pending = chainPending();
            const a = allocateNonce({ chainPending: pending, storedNext, released });
            expect(held.has(a.nonce) || pool.has(a.nonce) || a.nonce < mined).toBe(false);
            for (let n = pending; n < a.nonce; n += 1) expect(held.has(n) || pool.has(n)).toBe(true);
            held.add(a.nonce);
            storedNext = a.next;
            released = released.filter((n) => !a.drop.includes(n));
            // Nothing the chain has not passed is forgotten: a dropped nonce is used or passed.
            for (const n of a.drop) expect(n === a.nonce || n < pending).toBe(true);
          } else if (s.kind === 'send' || s.kind === 'fail') {
            const list = [...held];
            if (list.length === 0) continue;
            const n = list[s.pick % list.length]!;
            held.delete(n);
            if (s.kind === 'send') pool.add(n);
            else released.push(n);
          } else {
            while (pool.has(mined)) pool.delete(mined++);
          }
        }
      }),
      { numRuns: 500 },
    );
  });
});
