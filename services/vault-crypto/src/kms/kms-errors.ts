import { UnavailableError } from '@custos/service-kit';

/** Thrown when a wrapped key cannot be unwrapped (wrong key, wrong context, or corrupt bytes). */
export class KeyUnwrapError extends Error {
  constructor() {
    super('data key could not be unwrapped');
    this.name = 'KeyUnwrapError';
  }
}

/**
 * The key-management provider could not be reached or refused to serve (network, credentials, a
 * disabled key, a lost HSM session). The message names the provider, the operation and the cause
 * (endpoints and key ARNs included) for the log and the health report; the `detail` callers get
 * (503, try again later) names only the provider. Neither ever holds key material.
 */
export class KmsUnavailableError extends UnavailableError {
  constructor(
    readonly provider: string,
    readonly operation: string,
    cause: string,
  ) {
    super(`the key-management provider (${provider}) is unavailable; try again later`);
    this.message = `key-management provider ${provider}: ${operation} failed: ${cause}`;
  }
}
