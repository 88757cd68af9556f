import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { type Principal, actorOf, isCreator, isCreatorOrAdmin } from '@custos/auth';
import { writeEvent } from '@custos/events';
import {
  ConflictError,
  GoneError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitedError,
  type Transaction,
  UnauthenticatedError,
  isUuid,
} from '@custos/service-kit';
import type { AccessService } from '../access/access-service.js';
import { shareAudit, writeVaultCryptoAudit } from '../audit/vault-crypto-audit.js';
import type { outbox } from '../db/schema.js';
import { KEY_MATERIAL_TYPES } from '../secrets/secret-fns.js';
import { type SecretService, requirePasskeyUnlock } from '../secrets/secret-service.js';
import type { SecretRow } from '../secrets/secret-store.js';
import type { VaultStore } from '../vaults/vault-store.js';
import {
  HUMAN_ONLY_RECIPIENTS,
  MAX_PASSPHRASE_ATTEMPTS,
  SHARE_CREATIONS_PER_MINUTE,
  type ShareState,
  checkShareInput,
  goneDetail,
  ipAllowed,
  isRecipient,
  recipientKind,
  retryAfterSeconds,
  shareState,
  versionReadable,
} from './share-fns.js';
import { hashPassphrase, verifyPassphrase } from './share-passphrase.js';
import type { ShareRow, ShareStore } from './share-store.js';
import type { ShareRequest } from './share-types.js';

/** SHA-256 of a link secret: the stored form (the secret has 256 random bits, no slow hash needed). */
export function linkSecretHash(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

/** Whether `secret` is the link secret of a share storing `hash` (constant time; null never matches). */
export function linkSecretMatches(secret: string, hash: Buffer | null): boolean {
  if (!hash || hash.length !== 32 || !/^[A-Za-z0-9_-]{43}$/.test(secret)) return false;
  return timingSafeEqual(linkSecretHash(secret), hash);
}

/** A new share and its link secret (returned this once; only its hash is stored). */
export interface CreatedShare {
  share: ShareRow;
  linkSecret: string;
}

/** An opened share: the counted share, the version it pins and the value (the caller zeroes it). */
export interface OpenedShare {
  share: ShareRow;
  row: SecretRow;
  value: Buffer;
}

/**
 * Share rules (SPEC §4.6, docs/decisions.md "Sharing"): who may share (whoever may read the
 * version), the per-org creation limit, who may accept, decline and revoke, and the public open
 * with its recipient, IP, passphrase, expiry and count checks. Every change and every open —
 * refused ones too — writes an audit record in the transaction of the change.
 */
export class ShareService {
  constructor(
    private readonly deps: {
      store: ShareStore;
      vaults: VaultStore;
      access: AccessService;
      secrets: SecretService;
      outbox: typeof outbox;
    },
  ) {}

  private audit(
    tx: Transaction,
    s: Pick<ShareRow, 'id' | 'orgId'>,
    caller: Principal | undefined,
    action: string,
    details: Record<string, unknown>,
  ): Promise<string> {
    return writeVaultCryptoAudit(tx, shareAudit(s, caller, action, details));
  }

  /** Creates a share of the version `secretId` (SPEC §4.6); see docs/decisions.md for the rules. */
  async create(
    p: Principal,
    secretId: string,
    request: ShareRequest,
    passkeyToken: string,
  ): Promise<CreatedShare> {
    const input = checkShareInput(request, new Date());
    if (p.kind === 'agent' && HUMAN_ONLY_RECIPIENTS.has(input.recipientType)) {
      throw new PermissionDeniedError(`agents cannot create ${input.recipientType} shares; humans only`);
    }
    let recipientId = input.recipientId ?? null;
    if (input.recipientType === 'creator') {
      // `creator`: the human behind the caller — the user themself, or the user who registered the agent.
      recipientId = p.kind === 'user' ? p.userId : (p.createdBy ?? null);
      if (!recipientId) throw new PermissionDeniedError('this agent has no registering user to share with');
    }

    const row = isUuid(secretId) ? await this.deps.store.version(secretId) : undefined;
    if (!row || row.deletedAt !== null || row.orgId !== p.orgId) throw new NotFoundError('secret', secretId);
    const vault = this.deps.access.visible(p, await this.deps.vaults.get(row.vaultId), secretId);
    requirePasskeyUnlock(p, passkeyToken);
    await this.deps.access.authorize(p, vault, row.path, 'read');
    if (p.kind === 'agent' && p.intentsApiEnabled && KEY_MATERIAL_TYPES.has(row.type)) {
      throw new PermissionDeniedError(
        `an agent with the Intents API enabled cannot share ${row.type} secrets`,
      );
    }
    if (!versionReadable(row, new Date())) {
      throw new GoneError('this secret version is disabled, expired or out of reads');
    }

    const passphraseHash = input.passphrase ? await hashPassphrase(input.passphrase) : null;
    const linkSecret = randomBytes(32).toString('base64url');
    const actor = actorOf(p);
    const made = await this.deps.store.transaction(async (tx) => {
      const recent = await this.deps.store.lockAndCountRecent(tx, p.orgId);
      if (recent.count >= SHARE_CREATIONS_PER_MINUTE) {
        return { share: undefined, retryAfter: retryAfterSeconds(recent.oldest ?? recent.now, recent.now) };
      }
      const share = await this.deps.store.insert(tx, {
        orgId: p.orgId,
        secretVersionId: row.id,
        vaultId: row.vaultId,
        path: row.path,
        createdBy: actor.actorId,
        createdByType: actor.actorType,
        recipientType: input.recipientType,
        recipientId,
        recipientEmail: input.email ?? null,
        secretHash: linkSecretHash(linkSecret),
        passphraseHash,
        ipAllowlist: input.ipAllowlist ?? null,
        expiresAt: input.expiresAt,
        maxAccessCount: input.maxAccessCount,
      });
      await this.audit(tx, share, p, 'share.created', {
        secret_version_id: row.id,
        vault_id: row.vaultId,
        path: row.path,
        version: row.version,
        recipient_type: share.recipientType,
        recipient_id: share.recipientId,
        // No e-mail address: the append-only log could never erase it (as identity's records).
        has_recipient_email: share.recipientEmail !== null,
        expires_at: share.expiresAt.toISOString(),
        max_access_count: share.maxAccessCount,
        passphrase_protected: passphraseHash !== null,
        ip_allowlist: share.ipAllowlist,
      });
      if (share.recipientEmail) {
        // identity owns the mailer: it consumes this event and, when it sends the mail, asks
        // issueMailLink for the link's secret. The event names the share only: no link secret
        // and no address, so neither the outbox nor JetStream keeps one (docs/decisions.md,
        // "E-mailed share links").
        await writeEvent(tx, this.deps.outbox, {
          name: 'share.email_requested',
          orgId: p.orgId,
          data: {
            share_id: share.id,
            created_by: share.createdBy,
            created_by_type: share.createdByType,
          },
        });
      }
      return { share, retryAfter: 0 };
    });
    if (!made.share) throw new RateLimitedError(made.retryAfter);
    return { share: made.share, linkSecret };
  }

  /**
   * A new secret for the e-mailed link of an external-e-mail share of `orgId` that still opens,
   * asked by identity as it mails the link (so the secret exists only in that mail). A second
   * issue replaces the first: a redelivered event mails a link and the earlier one stops working,
   * so at most one mailed link opens. The creator's link is not touched. Audited
   * (`share.mail_link_issued`, system actor). Unknown, another org's or not an e-mail share: 404;
   * revoked, declined, expired or used up: 410 (nothing to mail).
   */
  async issueMailLink(shareId: string, orgId: string): Promise<{ share: ShareRow; linkSecret: string }> {
    if (!isUuid(shareId) || !isUuid(orgId)) throw new NotFoundError('share', shareId);
    const linkSecret = randomBytes(32).toString('base64url');
    const share = await this.deps.store.transaction(async (tx) => {
      const row = await this.deps.store.setMailSecret(tx, shareId, orgId, linkSecretHash(linkSecret));
      if (!row) return undefined;
      await writeVaultCryptoAudit(tx, {
        orgId: row.orgId,
        actorType: 'system',
        actorId: null,
        action: 'share.mail_link_issued',
        resourceType: 'share',
        resourceId: row.id,
        metadata: { secret_version_id: row.secretVersionId, recipient_type: row.recipientType },
      });
      return row;
    });
    if (share) return { share, linkSecret };
    const s = await this.deps.store.get(shareId);
    if (!s || s.orgId !== orgId || s.recipientType !== 'external_email' || !s.recipientEmail) {
      throw new NotFoundError('share', shareId);
    }
    const state = shareState({ ...s, passphraseHash: null }, new Date());
    throw new GoneError(goneDetail(state === 'open' ? 'exhausted' : state));
  }

  /** The shares the caller created, newest first. */
  async outbound(p: Principal): Promise<ShareRow[]> {
    const a = actorOf(p);
    return this.deps.store.listOutbound(p.orgId, a.actorId, a.actorType);
  }

  /** The unrevoked shares addressed to the caller, newest first. */
  async inbound(p: Principal): Promise<ShareRow[]> {
    const a = actorOf(p);
    return this.deps.store.listInbound(p.orgId, a.actorId, a.actorType);
  }

  /** A share of the caller's org; another org's, an unknown id or a non-UUID is 404. */
  private async ofOrg(p: Principal, shareId: string): Promise<ShareRow> {
    const s = isUuid(shareId) ? await this.deps.store.get(shareId) : undefined;
    if (!s || s.orgId !== p.orgId) throw new NotFoundError('share', shareId);
    return s;
  }

  /**
   * The recipient accepts (informational: the share is theirs) or declines (the share closes).
   * Repeating a decision is a no-op; accepting a declined share is 409; a revoked or expired one 410.
   */
  async decide(p: Principal, shareId: string, decision: 'accept' | 'decline'): Promise<void> {
    const s = await this.ofOrg(p, shareId);
    if (!isRecipient(p, s)) throw new PermissionDeniedError(`only the share's recipient may ${decision} it`);
    const outcome = await this.deps.store.transaction(async (tx) => {
      const changed = await this.deps.store.decide(tx, s.id, decision);
      if (!changed) return this.deps.store.get(s.id, tx);
      await this.audit(tx, changed, p, decision === 'accept' ? 'share.accepted' : 'share.declined', {
        secret_version_id: changed.secretVersionId,
        recipient_type: changed.recipientType,
      });
      return undefined;
    });
    if (!outcome) return;
    if (outcome.revokedAt) throw new GoneError(goneDetail('revoked'));
    if (decision === 'accept' && outcome.declinedAt) throw new ConflictError('this share was declined');
    if (decision === 'decline' && outcome.declinedAt) return;
    if (decision === 'accept' && outcome.acceptedAt && outcome.expiresAt.getTime() > Date.now()) return;
    throw new GoneError(goneDetail('expired'));
  }

  /** Revokes a share: its creator, or an owner or admin of its org. Revoking twice is a no-op. */
  async revoke(p: Principal, shareId: string): Promise<void> {
    const s = await this.ofOrg(p, shareId);
    const creator = isCreator(p, s);
    if (!isCreatorOrAdmin(p, s))
      throw new PermissionDeniedError("only the share's creator or an org admin may revoke it");
    await this.deps.store.transaction(async (tx) => {
      const revoked = await this.deps.store.revoke(tx, s.id);
      if (!revoked) return;
      await this.audit(tx, revoked, p, 'share.revoked', {
        secret_version_id: revoked.secretVersionId,
        recipient_type: revoked.recipientType,
        access_count: revoked.accessCount,
        by: creator ? 'creator' : 'org_admin',
      });
    });
  }

  /** Writes the audit record of a refused open in its own transaction, then throws the refusal. */
  private async refuse(
    s: ShareRow,
    caller: Principal | undefined,
    reason: string,
    err: Error,
  ): Promise<never> {
    await this.deps.store.transaction((tx) =>
      this.audit(tx, s, caller, 'share.access_denied', {
        reason,
        secret_version_id: s.secretVersionId,
        recipient_type: s.recipientType,
        access_count: s.accessCount,
        max_access_count: s.maxAccessCount,
      }),
    );
    throw err;
  }

  private refuseGone(s: ShareRow, caller: Principal | undefined, state: Exclude<ShareState, 'open'>) {
    return this.refuse(s, caller, state, new GoneError(goneDetail(state)));
  }

  /**
   * Opens a share (the public link). `caller` is the verified JWT when one was sent: shares that
   * name a recipient (creator, user, agent) open only for that recipient's token; link and e-mail
   * shares open for anyone. Then the IP allowlist, then the passphrase (at most 5 wrong ones, ever),
   * then the pinned version must still be readable. The value is decrypted first and returned only
   * if the statement that counts the open and the audit record commit together (fail-closed).
   */
  async open(
    shareId: string,
    linkSecret: string,
    caller: Principal | undefined,
    clientIp: string | undefined,
    passphrase: string,
  ): Promise<OpenedShare> {
    const s = isUuid(shareId) ? await this.deps.store.get(shareId) : undefined;
    // The id alone opens nothing: without its link secret a share is as unknown as a wrong id (no
    // audit record either, so an id from a log cannot even probe whether the share still exists).
    // Shares made before link secrets (no hash) never open. The error names no id.
    // Either link opens it: the creator's, or the e-mailed one (external-e-mail shares).
    const known =
      s !== undefined &&
      (linkSecretMatches(linkSecret, s.secretHash) || linkSecretMatches(linkSecret, s.mailSecretHash));
    if (!s || !known) throw new NotFoundError('share');
    const state = shareState(s, new Date());
    if (state !== 'open') return this.refuseGone(s, caller, state);

    if (recipientKind(s)) {
      if (!caller) {
        return this.refuse(
          s,
          caller,
          'recipient_token_missing',
          new UnauthenticatedError(
            "this share is addressed to a recipient: send the recipient's bearer token",
          ),
        );
      }
      if (!isRecipient(caller, s)) {
        return this.refuse(
          s,
          caller,
          'not_recipient',
          new PermissionDeniedError('this share is addressed to another recipient'),
        );
      }
    }

    if (s.ipAllowlist && !ipAllowed(s.ipAllowlist, clientIp)) {
      return this.refuse(
        s,
        caller,
        'ip_not_allowed',
        new PermissionDeniedError("the client address is not in this share's IP allowlist", {
          type: 'ip_denied',
        }),
      );
    }

    let slot = false;
    if (s.passphraseHash) {
      if (!passphrase) {
        return this.refuse(
          s,
          caller,
          'passphrase_missing',
          new PermissionDeniedError('this share needs its passphrase in the X-Share-Passphrase header', {
            type: 'passphrase_required',
          }),
        );
      }
      if (!(await this.deps.store.reservePassphraseAttempt(s.id)))
        return this.refuseGone(s, caller, 'locked');
      slot = true;
      if (!(await verifyPassphrase(passphrase, s.passphraseHash))) {
        return this.refuse(
          s,
          caller,
          'passphrase_invalid',
          new PermissionDeniedError(
            `wrong passphrase; the share locks after ${MAX_PASSPHRASE_ATTEMPTS} wrong passphrases`,
            { type: 'passphrase_invalid' },
          ),
        );
      }
    }
    return this.countAndOpen(s, caller, slot);
  }

  private async countAndOpen(
    s: ShareRow,
    caller: Principal | undefined,
    slot: boolean,
  ): Promise<OpenedShare> {
    const row = await this.deps.store.version(s.secretVersionId);
    if (!versionReadable(row, new Date())) {
      if (slot) await this.deps.store.releasePassphraseAttempt(s.id);
      return this.refuse(
        s,
        caller,
        'secret_unavailable',
        new GoneError('the shared secret version was deleted, disabled, expired or out of reads'),
      );
    }
    // Decrypt before the counting transaction (a KMS call never runs inside one); the value leaves
    // only after the count and its audit record have committed. A correct passphrase's attempt slot
    // is given back unless that transaction spent it, also when the KMS or the database failed.
    let value: Buffer | undefined;
    let slotSettled = !slot;
    try {
      value = await this.deps.secrets.openVersion(row);
      const counted = await this.deps.store.transaction(async (tx) => {
        const share = await this.deps.store.countAccess(tx, s.id, slot);
        if (!share) return undefined;
        await this.audit(tx, share, caller, 'share.accessed', {
          secret_version_id: share.secretVersionId,
          vault_id: share.vaultId,
          path: share.path,
          recipient_type: share.recipientType,
          access_count: share.accessCount,
          max_access_count: share.maxAccessCount,
        });
        return share;
      });
      if (!counted) {
        const now = (await this.deps.store.get(s.id)) ?? s;
        if (slot) await this.deps.store.releasePassphraseAttempt(s.id);
        slotSettled = true;
        const state = shareState({ ...now, passphraseHash: null }, new Date());
        return await this.refuseGone(now, caller, state === 'open' ? 'exhausted' : state);
      }
      slotSettled = true;
      return { share: counted, row, value };
    } catch (err) {
      value?.fill(0);
      if (!slotSettled) await this.deps.store.releasePassphraseAttempt(s.id).catch(() => undefined);
      throw err;
    }
  }
}
