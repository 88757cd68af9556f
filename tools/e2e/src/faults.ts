/** Polls `check` every 100 ms until it is true; throws naming `what` (and `why()`) after `timeoutMs`. */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
  why?: () => string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline)
      throw new Error(`${what}: not within ${timeoutMs} ms${why ? `; ${why()}` : ''}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}
