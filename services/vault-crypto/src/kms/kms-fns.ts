import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { KmsHealth, KmsProvider } from './kms-types.js';

const HEALTH_CONTEXT = 'custos:health';

/** Default self-test: wraps and unwraps a random key; true only if it comes back intact. */
async function roundTrip(kms: KmsProvider): Promise<boolean> {
  const probe = randomBytes(32);
  try {
    const back = await kms.unwrapKey(await kms.wrapKey(probe, HEALTH_CONTEXT), HEALTH_CONTEXT);
    const same = back.length === probe.length && timingSafeEqual(back, probe);
    back.fill(0);
    return same;
  } finally {
    probe.fill(0);
  }
}

/**
 * Self-tests `kms` within `timeoutMs`: the provider's own `health()` when it has one, otherwise a
 * wrap/unwrap round trip of a random key. Never throws; the detail never holds key material.
 */
export async function checkKmsHealth(kms: KmsProvider, timeoutMs = 3000): Promise<KmsHealth> {
  const started = performance.now();
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  try {
    const check = kms.health ? kms.health(abort.signal).then(() => true) : roundTrip(kms);
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        abort.abort();
        reject(new Error(`no answer within ${timeoutMs} ms`));
      }, timeoutMs);
    });
    const healthy = await Promise.race([check, timeout]);
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
  }
}
