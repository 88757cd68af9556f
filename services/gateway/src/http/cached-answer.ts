/**
 * One answer of `ask` for `ttlMs`: callers within that time share it, and callers that arrive while
 * it is being asked share that one call. A failed ask is not kept (the next caller asks again).
 */
export function cachedAnswer<T>(
  ttlMs: number,
  ask: () => Promise<T>,
  now: () => number = Date.now,
): () => Promise<T> {
  let entry: { at: number; answer: Promise<T> } | undefined;
  return () => {
    const t = now();
    if (!entry || t - entry.at >= ttlMs) {
      const fresh = { at: t, answer: ask() };
      fresh.answer.catch(() => {
        if (entry === fresh) entry = undefined;
      });
      entry = fresh;
    }
    return entry.answer;
  };
}
