import { isUuid } from '@custos/service-kit';
import { type EventEnvelope, IdempotentConsumer, type ServiceEvents, subjectFor } from '@custos/events';
import type { Database, Logger } from '@custos/service-kit';
import { inbox } from '../db/schema.js';
import type { Mailer } from '../mail/mailer.js';
import type { MailContent } from '../mail/templates.js';

/** The durable consumer (and inbox key) of share e-mails; stable across restarts. */
export const SHARE_MAIL_CONSUMER = 'identity-share-mail';

/** What vault-crypto's `share.email_requested` event carries (never the value or passphrase). */
export interface ShareEmailRequested {
  share_id: string;
  email: string;
  expires_at: string;
  max_access_count: number;
  passphrase_protected: boolean;
}

/** The event's data when it is well-formed; undefined otherwise (it is then dropped, not retried). */
export function shareEmailData(data: Record<string, unknown>): ShareEmailRequested | undefined {
  const { share_id, email, expires_at, max_access_count, passphrase_protected } = data;
  if (typeof share_id !== 'string' || !isUuid(share_id)) return undefined;
  if (typeof email !== 'string' || !/^[^\s@]+@[^\s@]+$/.test(email) || email.length > 254) return undefined;
  if (typeof expires_at !== 'string' || Number.isNaN(Date.parse(expires_at))) return undefined;
  return {
    share_id,
    email,
    expires_at,
    max_access_count: typeof max_access_count === 'number' ? max_access_count : 1,
    passphrase_protected: passphrase_protected === true,
  };
}

/** The e-mail that hands a share link to an external recipient. */
export function shareEmail(d: ShareEmailRequested, publicBaseUrl: string): MailContent {
  const link = `${publicBaseUrl}/v1/share/${d.share_id}`;
  const opens = d.max_access_count === 1 ? 'once' : `${d.max_access_count} times`;
  const lines = [
    'Someone shared a secret with you through Custos.',
    '',
    'Open it with this link:',
    '',
    link,
    '',
    `The link works until ${new Date(d.expires_at).toUTCString()} and can be opened ${opens}.`,
  ];
  if (d.passphrase_protected) {
    lines.push(
      '',
      'It is protected by a passphrase, which the sender will give you separately. Send it in the',
      'X-Share-Passphrase header. After 5 wrong passphrases the link stops working.',
    );
  }
  lines.push('', 'If you did not expect this, you can ignore this e-mail.', '\n-- \nCustos\n');
  return { template: 'share-link', subject: 'A secret was shared with you', text: lines.join('\n') };
}

/**
 * Sends the link of every external-e-mail share (vault-crypto has no mailer). The event id is
 * recorded in identity's inbox with the handler's transaction, so a redelivery sends nothing; a
 * failed send rolls back and is retried.
 */
export function startShareMailConsumer(deps: {
  events: ServiceEvents;
  db: Database;
  mailer: Mailer;
  publicBaseUrl: string;
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
      await deps.mailer.send({ to: d.email, ...shareEmail(d, deps.publicBaseUrl) });
    },
  });
  consumer.start();
  return consumer;
}
