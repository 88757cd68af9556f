import { CustosError, isUuid } from '@custos/service-kit';
import { type EventEnvelope, IdempotentConsumer, type ServiceEvents, subjectFor } from '@custos/events';
import type { Database, Logger } from '@custos/service-kit';
import { inbox } from '../db/schema.js';
import type { Notifier } from '../notifications/notifier.js';
import type { VaultCryptoClient } from '../peers/vault-crypto-client.js';

/** The durable consumer (and inbox key) of share e-mails; stable across restarts. */
export const SHARE_MAIL_CONSUMER = 'identity-share-mail';

/**
 * What identity needs of vault-crypto's `share.email_requested` event: the share and its org. The
 * event carries no link secret and no address (events stay in JetStream for days); both come from
 * vault-crypto when the mail is sent. Older events that still carry more are read the same way.
 */
export interface ShareEmailRequested {
  share_id: string;
  org_id: string;
}

/** The event's share and org when they are well-formed; undefined otherwise (dropped, not retried). */
export function shareEmailData(
  event: Pick<EventEnvelope, 'org_id' | 'data'>,
): ShareEmailRequested | undefined {
  const shareId = event.data['share_id'];
  if (typeof shareId !== 'string' || !isUuid(shareId)) return undefined;
  if (typeof event.org_id !== 'string' || !isUuid(event.org_id)) return undefined;
  return { share_id: shareId, org_id: event.org_id };
}

/** Whether vault-crypto's refusal means there is nothing to mail (the share is gone or closed). */
export function nothingToMail(err: unknown): boolean {
  return err instanceof CustosError && (err.kind === 'not_found' || err.kind === 'gone');
}

/**
 * Sends the link of every external-e-mail share (vault-crypto has no mailer). At send time it asks
 * vault-crypto for the e-mailed link's secret, so the secret exists only in the mail. The event id
 * is recorded in identity's inbox with the handler's transaction, so a redelivery sends nothing; a
 * failed send rolls back and is retried, and its retry gets a new secret (the one issued before
 * stops opening: at most one mailed link works). A share revoked, expired or used up by then is
 * not mailed.
 */
export function startShareEmailRequestedConsumer(deps: {
  events: ServiceEvents;
  db: Database;
  notifier: Pick<Notifier, 'shareLink'>;
  vaultCrypto: Pick<VaultCryptoClient, 'issueShareMailLink'>;
  logger: Logger;
}): IdempotentConsumer {
  const consumer = new IdempotentConsumer({
    link: deps.events.link,
    stream: deps.events.stream,
    durable: SHARE_MAIL_CONSUMER,
    filterSubject: subjectFor(deps.events.subjectPrefix, 'share.email_requested'),
    db: deps.db,
    inbox,
    logger: deps.logger,
    handler: async (event: EventEnvelope) => {
      const d = shareEmailData(event);
      if (!d) {
        deps.logger.error({ event_id: event.id }, 'dropping malformed share.email_requested event');
        return;
      }
      let link;
      try {
        link = await deps.vaultCrypto.issueShareMailLink(d.share_id, d.org_id);
      } catch (err) {
        if (!nothingToMail(err)) throw err;
        deps.logger.info(
          { event_id: event.id, share_id: d.share_id, reason: (err as CustosError).kind },
          'share link not mailed: the share no longer opens',
        );
        return;
      }
      await deps.notifier.shareLink(link.email, {
        shareId: d.share_id,
        linkSecret: link.linkSecret,
        expiresAt: link.expiresAt,
        maxAccessCount: link.maxAccessCount,
        passphraseProtected: link.passphraseProtected,
      });
    },
  });
  consumer.start();
  return consumer;
}
