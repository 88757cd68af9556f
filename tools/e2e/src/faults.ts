import { waitFor } from '@custos/service-kit/testing';

/**
 * service-kit's waitFor for a yes/no check, failing with what was awaited and, from `why`, the state
 * that explains it (which services exited, what the last answers were).
 */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
  why?: () => string,
): Promise<void> {
  await waitFor(async () => (await check()) || undefined, timeoutMs).catch((err: unknown) => {
    throw new Error(`${what}: ${(err as Error).message}${why ? `; ${why()}` : ''}`);
  });
}
