import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { KmsHealth, KmsProvider } from './kms-types.js';

/** Wraps and unwraps a random key through `kms`; healthy only if the round trip returns it intact. */
export async function checkKmsHealth(kms: KmsProvider, timeoutMs = 3000): Promise<KmsHealth> {
  const started = performance.now();
  const probe = randomBytes(32);
  let timer: NodeJS.Timeout | undefined;
  try {
    const roundTrip = (async () =>
      kms.unwrapKey(await kms.wrapKey(probe, 'custos:health'), 'custos:health'))();
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    });
    const back = await Promise.race([roundTrip, timeout]);
    const healthy = back.length === probe.length && timingSafeEqual(back, probe);
    return {
      healthy,
      detail: healthy ? '' : 'round trip returned a different key',
      latencyMs: performance.now() - started,
    };
  } catch (err) {
    return {
      healthy: false,
      detail: err instanceof Error ? err.message : 'provider failed',
      latencyMs: performance.now() - started,
    };
  } finally {
    if (timer) clearTimeout(timer);
    probe.fill(0);
  }
}
