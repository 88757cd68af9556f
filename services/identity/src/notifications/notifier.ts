import type { Mailer } from './mailer.js';
import {
  approvalRequestedEmail,
  emailChangeCodeEmail,
  emailChangedNoticeEmail,
  orgInviteEmail,
  passwordResetEmail,
  shareLinkEmail,
  verificationEmail,
} from './templates.js';

/**
 * The e-mails identity sends, one method each: it renders the template, builds the links from
 * PUBLIC_BASE_URL and hands the message to the mailer. Each rejects when the mailer does; the
 * caller decides whether that fails its request.
 */
export class Notifier {
  constructor(
    private readonly mailer: Mailer,
    private readonly publicBaseUrl: string,
  ) {}

  private link(path: string, token: string): string {
    return `${this.publicBaseUrl}${path}?token=${encodeURIComponent(token)}`;
  }

  /** The link and token that verify a new account's address. */
  verifyEmail(to: string, token: string, expiresInSeconds: number): Promise<void> {
    const link = this.link('/verify-email', token);
    return this.mailer.send({ to, ...verificationEmail({ link, token, expiresInSeconds }) });
  }

  /** The notice to the replaced address of an e-mail change, with its undo link and token. */
  emailChangedNotice(to: string, token: string, expiresInSeconds: number): Promise<void> {
    const link = this.link('/undo-email-change', token);
    return this.mailer.send({ to, ...emailChangedNoticeEmail({ link, token, expiresInSeconds }) });
  }

  /** The link and token that reset a forgotten password. */
  passwordReset(to: string, token: string, expiresInSeconds: number): Promise<void> {
    const link = this.link('/reset-password', token);
    return this.mailer.send({ to, ...passwordResetEmail({ link, token, expiresInSeconds }) });
  }

  /** The code that confirms a new e-mail address, sent to that address. */
  emailChangeCode(to: string, code: string, expiresInSeconds: number): Promise<void> {
    return this.mailer.send({ to, ...emailChangeCodeEmail({ code, expiresInSeconds }) });
  }

  /** An invitation to join an org. */
  orgInvite(
    to: string,
    invite: { orgName: string; inviter: string; token: string; expiresInSeconds: number },
  ): Promise<void> {
    const link = this.link('/accept-invite', invite.token);
    return this.mailer.send({ to, ...orgInviteEmail({ ...invite, link }) });
  }

  /** The link of a secret shared with an external address. */
  shareLink(
    to: string,
    share: {
      shareId: string;
      linkSecret: string;
      expiresAt: Date;
      maxAccessCount: number;
      passphraseProtected: boolean;
    },
  ): Promise<void> {
    // The share id alone opens nothing: the link carries the share's secret too (`key`).
    const { linkSecret, ...rest } = share;
    const link = `${this.publicBaseUrl}/v1/share/${rest.shareId}?key=${encodeURIComponent(linkSecret)}`;
    return this.mailer.send({ to, ...shareLinkEmail({ ...rest, link }) });
  }

  /** The notice of a new approval request, with the link to it in the app. */
  approvalRequested(
    to: string,
    approval: {
      approvalId: string;
      action: string;
      riskTier: number;
      kind: 'single' | 'consensus';
      title: string;
      agentName: string;
      targetType: string;
      targetId: string;
      expiresAt: Date | undefined;
    },
  ): Promise<void> {
    const { approvalId, ...rest } = approval;
    const link = `${this.publicBaseUrl}/approvals/${encodeURIComponent(approvalId)}`;
    return this.mailer.send({ to, ...approvalRequestedEmail({ ...rest, link }) });
  }
}
