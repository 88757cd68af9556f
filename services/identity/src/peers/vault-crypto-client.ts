import { Metadata } from '@grpc/grpc-js';
import type { VaultCryptoServiceClient } from '@custos/proto/custos/vault_crypto/v1/service';
import { callUnary } from '@custos/service-kit';

/** What the mail of an external-e-mail share needs; `linkSecret` exists only here and in the mail. */
export interface ShareMailLink {
  linkSecret: string;
  email: string;
  expiresAt: Date;
  maxAccessCount: number;
  passphraseProtected: boolean;
}

/**
 * What identity asks vault-crypto: the secret of an e-mailed share link, issued as the mail is
 * sent (no event carries it). vault-crypto admits identity for that one RPC.
 */
export class VaultCryptoClient {
  constructor(private readonly vaultCrypto: VaultCryptoServiceClient) {}

  /** A new link secret for the share's e-mailed link (the one issued before stops opening). */
  async issueShareMailLink(shareId: string, orgId: string): Promise<ShareMailLink> {
    const r = await callUnary(
      this.vaultCrypto,
      this.vaultCrypto.issueShareMailLink,
      { shareId, orgId },
      new Metadata(),
    );
    return {
      linkSecret: r.linkSecret,
      email: r.email,
      expiresAt: new Date(r.expiresAt),
      maxAccessCount: Number(r.maxAccessCount),
      passphraseProtected: r.passphraseProtected,
    };
  }
}
