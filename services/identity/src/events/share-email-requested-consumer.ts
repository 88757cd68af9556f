import { isUuid } from '@custos/service-kit';
import { type EventEnvelope, IdempotentConsumer, type ServiceEvents, subjectFor } from '@custos/events';
import type { Database, Logger } from '@custos/service-kit';
import { inbox } from '../db/schema.js';
import type { Notifier } from '../notifications/notifier.js';

/** The durable consumer (and inbox key) of share e-mails; stable across restarts. */
export const SHARE_MAIL_CONSUMER = 'identity-share-mail';

/** What vault-crypto's `share.email_requested` event carries (never the value or passphrase). */
export interface ShareEmailRequested {
  share_id: string;
  /** The link secret (base64url, 256 bits): the link is the id plus this. */
  link_secret: string;
  email: string;
  expires_at: string;
  max_access_count: number;
  passphrase_protected: boolean;
}

/** The event's data when it is well-formed; undefined otherwise (it is then dropped, not retried). */
export function shareEmailData(data: Record<string, unknown>): ShareEmailRequested | undefined {
  const { share_id, link_secret, email, expires_at, max_access_count, passphrase_protected } = data;
  if (typeof share_id !== 'string' || !isUuid(share_id)) return undefined;
  // An event from before link secrets: its share no longer opens, so there is nothing to mail.
  if (typeof link_secret !== 'string' || !/^[A-Za-z0-9_-]{43}$/.test(link_secret)) return undefined;
  if (typeof email !== 'string' || !/^[^\s@]+@[^\s@]+$/.test(email) || email.length > 254) return undefined;
  if (typeof expires_at !== 'string' || Number.isNaN(Date.parse(expires_at))) return undefined;
  return {
    share_id,
    link_secret,
    email,
    expires_at,
    max_access_count: typeof max_access_count === 'number' ? max_access_count : 1,
    passphrase_protected: passphrase_protected === true,
  };
}

/**
 * Sends the link of every external-e-mail share (vault-crypto has no mailer). The event id is
 * recorded in identity's inbox with the handler's transaction, so a redelivery sends nothing; a
 * failed send rolls back and is retried.
 */
export function startShareEmailRequestedConsumer(deps: {
  events: ServiceEvents;
  db: Database;
  notifier: Pick<Notifier, 'shareLink'>;
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
      const d = shareEmailData(event.data);
      if (!d) {
        deps.logger.error({ event_id: event.id }, 'dropping malformed share.email_requested event');
        return;
      }
      await deps.notifier.shareLink(d.email, {
        shareId: d.share_id,
        linkSecret: d.link_secret,
        expiresAt: new Date(d.expires_at),
        maxAccessCount: d.max_access_count,
        passphraseProtected: d.passphrase_protected,
      });
    },
  });
  consumer.start();
  return consumer;
}
