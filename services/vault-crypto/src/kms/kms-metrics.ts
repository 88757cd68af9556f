import { Counter, Histogram, type Registry } from 'prom-client';
import { KeyUnwrapError, KmsUnavailableError } from './kms-errors.js';
import type { KmsProvider } from './kms-types.js';

/** The KMS operations that are measured. */
export type KmsOperation = 'wrap' | 'unwrap' | 'health';

/**
 * Why a KMS call failed, in classes an alert can count without ever seeing the message (which may
 * name endpoints and key ARNs): `unavailable` (network, credentials, a disabled key, a lost HSM
 * session: KmsUnavailableError), `rejected` (the provider answered but would not unwrap: wrong
 * key, wrong context, corrupt bytes), `error` (anything else).
 */
export function kmsFailureReason(err: unknown): 'unavailable' | 'rejected' | 'error' {
  if (err instanceof KmsUnavailableError) return 'unavailable';
  if (err instanceof KeyUnwrapError) return 'rejected';
  return 'error';
}

/**
 * `provider` measured on `registry`: every wrap, unwrap and self-test observes its duration in
 * `custos_kms_request_duration_seconds{provider,operation}`, and a failure counts in
 * `custos_kms_request_failures_total{provider,operation,reason}`. The provider is used unchanged;
 * only its calls are timed.
 */
export function measuredKms(provider: KmsProvider, registry: Registry): KmsProvider {
  const duration = new Histogram({
    name: 'custos_kms_request_duration_seconds',
    help: 'Duration of calls to the key-management provider, by provider and operation (wrap, unwrap, health).',
    labelNames: ['provider', 'operation'],
    // Local wraps take microseconds, a KMS round trip milliseconds, an HSM under load seconds.
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const failures = new Counter({
    name: 'custos_kms_request_failures_total',
    help: 'Failed calls to the key-management provider, by provider, operation and reason (unavailable, rejected, error).',
    labelNames: ['provider', 'operation', 'reason'],
    registers: [registry],
  });
  const name = provider.name;
  // Series exist from the start, so rates and ratios over them are defined before the first failure.
  for (const operation of ['wrap', 'unwrap'] as const) {
    duration.zero({ provider: name, operation });
    for (const reason of ['unavailable', 'error'] as const)
      failures.inc({ provider: name, operation, reason }, 0);
  }
  // A refused unwrap (wrong key, tampered ciphertext) is what CustosKmsUnwrapRejected counts with
  // increase(): its series has to exist before the first one.
  failures.inc({ provider: name, operation: 'unwrap', reason: 'rejected' }, 0);
  const measure = async <T>(operation: KmsOperation, call: () => Promise<T>): Promise<T> => {
    const end = duration.startTimer({ provider: name, operation });
    try {
      return await call();
    } catch (err) {
      failures.inc({ provider: name, operation, reason: kmsFailureReason(err) });
      throw err;
    } finally {
      end();
    }
  };
  const health = provider.health;
  return {
    name,
    wrapKey: (dataKey, context) => measure('wrap', () => provider.wrapKey(dataKey, context)),
    unwrapKey: (wrapped, context) => measure('unwrap', () => provider.unwrapKey(wrapped, context)),
    ...(health
      ? { health: (signal: AbortSignal) => measure('health', () => health.call(provider, signal)) }
      : {}),
    ...(provider.close ? { close: () => provider.close!() } : {}),
  };
}
