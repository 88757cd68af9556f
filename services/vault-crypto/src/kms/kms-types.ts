/** Result of a provider's self-test. */
export interface KmsHealth {
  healthy: boolean;
  /** Why it is unhealthy; never key material. */
  detail: string;
  latencyMs: number;
}

/**
 * A key-management provider: wraps and unwraps data keys with a key-encryption key it holds.
 * `local`, `aws-kms` and `pkcs11` implement it; the rest of vault-crypto sees only this.
 */
export interface KmsProvider {
  readonly name: string;
  /** Encrypts a data key; the result records everything needed to unwrap it later. */
  wrapKey(dataKey: Buffer, context: string): Promise<Buffer>;
  /** Decrypts a wrapped data key; `context` must equal the one used to wrap it. */
  unwrapKey(wrapped: Buffer, context: string): Promise<Buffer>;
  /**
   * A provider-specific self-test used instead of the default wrap/unwrap round trip: resolves when
   * the provider can serve, rejects with a reason (never key material) when it cannot.
   */
  health?(signal: AbortSignal): Promise<void>;
  /** Releases sessions and connections at shutdown; the provider is unusable afterwards. */
  close?(): Promise<void>;
}
