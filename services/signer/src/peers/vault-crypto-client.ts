import { Metadata } from '@grpc/grpc-js';
import type { AgentKeyVaultServiceClient } from '@custos/proto/custos/vault_crypto/v1/agent_keys';
import {
  ConflictError,
  type Logger,
  NotFoundError,
  UnavailableError,
  callUnary,
  describeError,
} from '@custos/service-kit';

/** What signer asks vault-crypto to keep: one key version's private half. */
export interface KeyToStore {
  orgId: string;
  agentId: string;
  chain: string;
  keyId: string;
  keyVersion: number;
  curve: string;
  privateKey: Buffer;
}

/**
 * vault-crypto's AgentKeyVaultService as signer uses it: the call carries no user token (it acts
 * for no user) and is authorized by signer's certificate alone.
 */
export class VaultCryptoClient {
  constructor(
    private readonly client: AgentKeyVaultServiceClient,
    private readonly logger: Logger,
  ) {}

  /** Seals the key in the org's `__agent-keys` vault; the id of the stored secret version. */
  async storeKey(k: KeyToStore): Promise<string> {
    try {
      const r = await callUnary(this.client, this.client.storeAgentKey, k, new Metadata());
      return r.secretId;
    } catch (err) {
      // Whatever vault-crypto said, the user's answer is that no key was made.
      this.logger.error(
        { err: describeError(err), key_id: k.keyId },
        'vault-crypto did not store an agent key',
      );
      if (err instanceof ConflictError) throw new ConflictError('the key was stored already');
      throw new UnavailableError('the key could not be stored; no key was created');
    }
  }

  /**
   * Opens a stored key version (`sign` or `export`); the caller zeroes the bytes. A key vault-crypto
   * does not find is NOT_FOUND; any other failure is 503 (nothing was signed or exported).
   */
  async loadKey(r: {
    orgId: string;
    secretId: string;
    keyId: string;
    purpose: 'sign' | 'export';
  }): Promise<Buffer> {
    try {
      const res = await callUnary(this.client, this.client.loadAgentKey, r, new Metadata());
      // The decoded message's bytes are copied for the caller and zeroed here: no other copy stays.
      // (The wire frame grpc-js read them from is its own and cannot be reached to zero it.)
      try {
        return Buffer.from(res.privateKey);
      } finally {
        res.privateKey.fill(0);
      }
    } catch (err) {
      this.logger.error(
        { err: describeError(err), key_id: r.keyId },
        'vault-crypto did not open an agent key',
      );
      if (err instanceof NotFoundError) throw new NotFoundError('signing key', r.keyId);
      throw new UnavailableError('the signing key could not be opened; nothing was signed');
    }
  }
}
