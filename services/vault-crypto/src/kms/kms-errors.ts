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
 * disabled key, a lost HSM session). `detail` names the provider, the operation and the cause, and
 * never holds key material; the gateway answers 503 and the caller may try again later.
 */
export class KmsUnavailableError extends UnavailableError {
  constructor(
    readonly provider: string,
    readonly operation: string,
    cause: string,
  ) {
    super(`key-management provider ${provider}: ${operation} failed: ${cause}`);
  }
}
