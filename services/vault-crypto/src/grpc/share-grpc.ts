import { type IdentityKeys, type Principal, bearerToken, currentCaller } from '@custos/auth';
import type { Share } from '@custos/proto/custos/vault_crypto/v1/shares';
import type { VaultCryptoServiceServer } from '@custos/proto/custos/vault_crypto/v1/service';
import { type AsyncService, currentRequestContext } from '@custos/service-kit';
import { encodeValue } from '../secrets/secret-fns.js';
import type { ShareService } from '../shares/share-service.js';
import type { ShareRow } from '../shares/share-store.js';

type ShareRpcs = Pick<
  AsyncService<VaultCryptoServiceServer>,
  | 'createShare'
  | 'listOutboundShares'
  | 'listInboundShares'
  | 'acceptShare'
  | 'declineShare'
  | 'revokeShare'
  | 'accessShare'
  | 'issueShareMailLink'
>;

/** A share as it leaves the service: never the passphrase hash nor the link secret's hash. */
export function shareMessage(s: ShareRow, now = new Date()): Share {
  return {
    id: s.id,
    secretId: s.secretVersionId,
    vaultId: s.vaultId,
    secretPath: s.path,
    recipientType: s.recipientType,
    recipientId: s.recipientId ?? '',
    recipientEmail: s.recipientEmail ?? '',
    expiresAt: s.expiresAt.toISOString(),
    maxAccessCount: String(s.maxAccessCount),
    accessCount: String(s.accessCount),
    createdAt: s.createdAt.toISOString(),
    createdBy: s.createdBy,
    createdByType: s.createdByType,
    hasPassphrase: s.passphraseHash !== null,
    ipAllowlist: s.ipAllowlist ?? [],
    isAccepted: s.acceptedAt !== null,
    isDeclined: s.declinedAt !== null,
    isRevoked: s.revokedAt !== null,
    isExpired: s.expiresAt.getTime() <= now.getTime(),
  };
}

/** gRPC handlers of the share RPCs of VaultCryptoService (merged into its adapter). */
export function shareRpcs(deps: { keys: IdentityKeys; shares: ShareService }): ShareRpcs {
  const caller = () => currentCaller(deps.keys);
  // The public open: a bearer token is optional, but one that is sent must verify.
  const optionalCaller = async (): Promise<Principal | undefined> =>
    bearerToken(currentRequestContext()?.authorization) ? caller() : undefined;
  return {
    async createShare(req) {
      const made = await deps.shares.create(
        await caller(),
        req.secretId,
        {
          recipientType: req.recipientType,
          recipientId: req.recipientId,
          email: req.email,
          expiresAt: req.expiresAt,
          maxAccessCount: req.maxAccessCount,
          passphrase: req.passphrase,
          ipAllowlist: req.ipAllowlist,
        },
        req.passkeyToken,
      );
      return { share: shareMessage(made.share), linkSecret: made.linkSecret };
    },
    async listOutboundShares() {
      return { shares: (await deps.shares.outbound(await caller())).map((s) => shareMessage(s)) };
    },
    async listInboundShares() {
      return { shares: (await deps.shares.inbound(await caller())).map((s) => shareMessage(s)) };
    },
    async acceptShare(req) {
      await deps.shares.decide(await caller(), req.shareId, 'accept');
      return {};
    },
    async declineShare(req) {
      await deps.shares.decide(await caller(), req.shareId, 'decline');
      return {};
    },
    async revokeShare(req) {
      await deps.shares.revoke(await caller(), req.shareId);
      return {};
    },
    // identity only (vaultCryptoAccess): the mesh certificate is the caller; no JWT is involved.
    async issueShareMailLink(req) {
      const { share, linkSecret } = await deps.shares.issueMailLink(req.shareId, req.orgId);
      return {
        linkSecret,
        email: share.recipientEmail ?? '',
        expiresAt: share.expiresAt.toISOString(),
        maxAccessCount: String(share.maxAccessCount),
        passphraseProtected: share.passphraseHash !== null,
      };
    },
    async accessShare(req) {
      const p = await optionalCaller();
      const opened = await deps.shares.open(
        req.shareId,
        req.linkSecret,
        p,
        currentRequestContext()?.clientIp,
        req.passphrase,
      );
      try {
        const out = encodeValue(opened.value);
        return {
          share: shareMessage(opened.share),
          type: opened.row.type,
          version: opened.row.version,
          value: out.value,
          valueEncoding: out.encoding,
        };
      } finally {
        opened.value.fill(0);
      }
    },
  };
}
